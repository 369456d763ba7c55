"""Safe extraction of downloaded archives: every member is checked before any is written; a marker skips reruns."""

from __future__ import annotations

import re
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.errors import DownloadError

MARKER_SUFFIX = ".extracted"


def marker_path(archive: Path) -> Path:
    """The marker that says ``archive`` has been fully extracted."""
    return archive.with_name(archive.name + MARKER_SUFFIX)


def extract(archive: Path, target: Path, *, nested: bool = False) -> bool:
    """Extract ``archive`` into ``target`` (False: its marker says done); ``nested``: each inner zip too, beside it."""
    marker = marker_path(archive)
    if marker.exists():
        return False
    target.mkdir(parents=True, exist_ok=True)
    try:
        if zipfile.is_zipfile(archive):
            written = _extract_zip(archive, target)
        elif tarfile.is_tarfile(archive):
            written = _extract_tar(archive, target)
        else:
            raise DownloadError(f"{archive}: not a zip or tar archive; delete it and run again")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise DownloadError(f"{archive}: cannot be extracted ({exc}); delete it and run again") from None
    if nested:
        for inner in sorted(p for p in written if p.suffix.lower() == ".zip" and p.is_file()):
            extract(inner, inner.with_suffix(""), nested=True)
    write_text_atomic(marker, "extracted\n")
    return True


def _member_dest(archive: Path, name: str, root: Path) -> Path:
    """Where a member would be written; refuse absolute names, ``..`` and anything resolving outside."""
    norm = name.replace("\\", "/")
    bad = norm.startswith("/") or re.match(r"^[A-Za-z]:", norm) or ".." in PurePosixPath(norm).parts or "\x00" in norm
    dest = root if bad else (root / norm).resolve()
    if bad or (dest != root and not dest.is_relative_to(root)):
        raise DownloadError(f"{archive.name}: refusing member {name!r}, it would land outside {root}")
    return dest


def _extract_zip(archive: Path, target: Path) -> list[Path]:
    """Check every zip member (paths and symlinks in the external attributes), then write them."""
    root = target.resolve()
    with zipfile.ZipFile(archive) as zf:
        plan: list[tuple[zipfile.ZipInfo, Path]] = []
        for info in zf.infolist():
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise DownloadError(f"{archive.name}: refusing symbolic link member {info.filename!r}")
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: type bits not recorded
                raise DownloadError(f"{archive.name}: refusing special member {info.filename!r}")
            plan.append((info, _member_dest(archive, info.filename, root)))
        written: list[Path] = []
        for info, dest in plan:
            if info.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, dest.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            written.append(dest)
    return written


def _extract_tar(archive: Path, target: Path) -> list[Path]:
    """Check every tar member (paths, no links), then extract with the standard ``data`` filter."""
    root = target.resolve()
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        written: list[Path] = []
        for member in members:
            if member.issym() or member.islnk():
                raise DownloadError(f"{archive.name}: refusing link member {member.name!r}")
            if not (member.isfile() or member.isdir()):
                raise DownloadError(f"{archive.name}: refusing special member {member.name!r}")
            dest = _member_dest(archive, member.name, root)
            if member.isfile():
                written.append(dest)
        try:
            tf.extractall(root, members=members, filter="data")
        except tarfile.FilterError as exc:
            raise DownloadError(f"{archive.name}: refusing unsafe member ({exc})") from None
    return written
