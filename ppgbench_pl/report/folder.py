"""A report folder is all of one report or untouched: built beside its target, then swapped into place.

Built in ``.<name>.building-<random>`` and exchanged with the target in one rename (Linux renameat2; elsewhere
two renames); a killed build's staging folder is removed by the next. A folder of other files is refused.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ppgbench_pl.report.load import ReportError

if TYPE_CHECKING:
    import pandas as pd

#: A file every report folder carries: what makes a folder one ppgbench may replace whole.
MARKER = ".ppgbench-report"
#: What a report made before the marker holds at its top level (such a folder may be replaced too).
LEGACY_ENTRIES = frozenset({"index.html", "findings.md", "protocol.md", "tables", "figures", "references.bib",
                            "methods.tex"})
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def is_report(folder: Path) -> bool:
    """Whether ``folder`` is a ppgbench report (marker, or a pre-marker report's files only) or empty."""
    entries = {p.name for p in folder.iterdir()}
    if not entries or MARKER in entries:
        return True
    return {"index.html", "findings.md"} <= entries and entries <= LEGACY_ENTRIES


def _target(output_dir: str | Path) -> Path:
    """The absolute target, refused up front if it is a file, the current folder (or above it), or not a report."""
    out = Path(output_dir).absolute()
    if out.is_symlink():
        out = out.resolve()  # replace the folder it points to; the link stays
    if out.exists() and not out.is_dir():
        raise ReportError(f"{output_dir}: the report folder is a file; choose another --output")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise ReportError(f"{output_dir}: the report folder would replace the current folder; choose a new "
                          "folder for --output")
    try:
        replaceable = not out.is_dir() or is_report(out)
    except OSError as exc:
        raise ReportError(f"{output_dir}: cannot read the report folder ({exc.strerror or exc})") from None
    if not replaceable:
        raise ReportError(f"{output_dir}: holds files that are not a ppgbench report (a report replaces its "
                          "folder whole); choose a new or empty folder for --output")
    return out


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2); False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):  # no C library by that name, or no renameat2 in it
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _swap_in(stage: Path, target: Path) -> None:
    if not target.exists():
        os.rename(stage, target)
        return
    if _exchange(stage, target):
        shutil.rmtree(stage, ignore_errors=True)  # now holds the old report
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, old / "report")
    os.rename(stage, target)
    shutil.rmtree(old, ignore_errors=True)


def remove_stale(target: Path) -> list[Path]:
    """Remove staging folders of builds of ``target`` that died (their lock is free); return them."""
    from ppgbench_pl.locks import LOCKS_WORK, LockBusy, file_lock

    removed = []
    prefix = f".{target.name}."
    for path in target.parent.iterdir():
        kind = path.name[len(prefix):].split("-", 1)[0] if path.name.startswith(prefix) else ""
        if kind not in ("building", "old") or not path.is_dir():
            continue
        if kind == "building":
            if not LOCKS_WORK or not (path / MARKER).is_file():
                continue
            try:
                with file_lock(path / MARKER, blocking=False):
                    pass
            except LockBusy:
                continue  # another build of the same folder is running
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


@contextmanager
def staged(output_dir: str | Path) -> Iterator[Path]:
    """Yield a fresh folder to build the report in; on success it replaces ``output_dir`` whole.

    On any exception (or a kill) the target is left as it was; the staging folder is removed (after a kill,
    by the next build).
    """
    from ppgbench_pl.atomic_io import dir_mode
    from ppgbench_pl.locks import file_lock

    target = _target(output_dir)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
        os.chmod(stage, dir_mode())
        (stage / "tables").mkdir()
    except OSError as exc:
        raise ReportError(f"{output_dir}: cannot create the report folder ({exc.strerror or exc})") from None
    try:
        with file_lock(stage / MARKER):
            yield stage
            _swap_in(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def write_tables(out: Path, frames: dict[str, pd.DataFrame]) -> list[Path]:
    """Write each frame as ``out/tables/<name>.csv`` (atomically); return the paths."""
    from ppgbench_pl.atomic_io import write_text_atomic

    paths = [out / "tables" / f"{name}.csv" for name in frames]
    for path, frame in zip(paths, frames.values(), strict=True):
        write_text_atomic(path, frame.to_csv(index=False))
    return paths
