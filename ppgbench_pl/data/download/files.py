"""What a downloaded file is and how it is verified: only a checked ``.part`` gets its final name."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.errors import DownloadError

CHUNK_BYTES = 1 << 20
CHECKSUMS_FILE = "checksums.json"


def safe_relpath(rel: str) -> str:
    """Check that a destination taken from a remote listing stays inside the dataset folder."""
    parts = rel.split("/")
    bad = (
        not rel
        or "\\" in rel
        or "\x00" in rel
        or re.match(r"^[A-Za-z]:", rel) is not None
        or any(p in ("", ".", "..") for p in parts)
    )
    if bad:
        raise DownloadError(f"refusing unsafe file name from the publisher's listing: {rel!r}")
    return rel


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch and what the publisher says about it (size and checksum are optional)."""

    url: str
    dest: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None

    def __post_init__(self) -> None:
        """Refuse destinations that would escape the dataset folder before anything is written."""
        safe_relpath(self.dest)


class ChecksumLog(dict[str, dict[str, Any]]):
    """The ``checksums.json`` of one dataset folder: SHA-256 and size of what was received (saved in batches)."""

    def __init__(self, folder: Path) -> None:
        """Load the existing log of ``folder`` (an unreadable log is treated as empty)."""
        super().__init__()
        self.path = folder / CHECKSUMS_FILE
        self._pending = 0
        self._last_save = time.monotonic()
        if self.path.is_file():
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = {}
            if isinstance(loaded, dict):
                self.update({k: v for k, v in loaded.items() if isinstance(v, dict)})

    def forget(self, rel: str) -> None:
        """Drop the entry of a file that is fetched afresh."""
        if self.pop(rel, None) is not None:
            self._pending += 1

    def record(self, rel: str, *, size: int, sha256: str, publisher: str | None) -> None:
        """Remember a verified file; ``publisher`` names the publisher's checksum kind, or None."""
        self[rel] = {"size": size, "sha256": sha256, "publisher_checksum": publisher}
        self._pending += 1
        if self._pending >= 200 or time.monotonic() - self._last_save > 30:
            self.save()

    def save(self) -> None:
        """Write the log atomically (temporary file, then rename)."""
        if not self and not self.path.exists():
            return
        write_text_atomic(self.path, json.dumps(self, indent=1, sort_keys=True) + "\n")
        self._pending = 0
        self._last_save = time.monotonic()


def file_hashes(path: Path, algos: tuple[str, ...]) -> dict[str, str]:
    """Hex digests of a file for several algorithms in one pass."""
    hs = {a: hashlib.new(a) for a in algos}
    with path.open("rb") as fh:
        while block := fh.read(CHUNK_BYTES):
            for h in hs.values():
                h.update(block)
    return {a: h.hexdigest() for a, h in hs.items()}


def mismatch(path: Path, item: RemoteFile, blob_id: str | None = None) -> str | None:
    """Why a file differs from the size and checksum published for ``item`` (None: it matches, or none is known)."""
    size = path.stat().st_size
    if item.size is not None and size != item.size:
        return f"size {size} bytes, published {item.size}"
    for algo in ("sha256", "md5"):
        if want := getattr(item, algo):
            got = file_hashes(path, (algo,))[algo]
            return None if got == want.lower() else f"{algo} {got}, published {want}"
    if blob_id:  # the hub's only checksum of a file outside Git LFS
        digest = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
        digest.update(path.read_bytes())
        return None if digest.hexdigest() == blob_id else f"git blob id {digest.hexdigest()}, published {blob_id}"
    return None


def already_complete(dest: Path, item: RemoteFile, log: ChecksumLog) -> bool:
    """Whether an existing final file matches the publisher's size/checksum, or what we recorded."""
    if mismatch(dest, item) is not None:
        return False
    recorded = log.get(item.dest)
    if item.sha256 or item.md5 or recorded is None:
        return True  # final names are only given after verification, and nothing more is known
    same_size = recorded.get("size") == dest.stat().st_size
    return same_size and file_hashes(dest, ("sha256",))["sha256"] == recorded.get("sha256")


def finish_download(item: RemoteFile, part: Path, dest: Path, expected: int | None, log: ChecksumLog) -> None:
    """Check size and checksum of the received ``.part`` and give it its final name."""
    got = part.stat().st_size if part.is_file() else 0
    if expected is not None and got != expected:
        if got > expected:
            part.unlink()
            raise DownloadError(f"{dest}: received {got} bytes, more than the expected {expected}; run again")
        raise DownloadError(f"{dest}: received {got} of {expected} bytes; run again to resume")
    algos = ("sha256", "md5") if item.md5 and not item.sha256 else ("sha256",)
    digests = file_hashes(part, algos)
    publisher = "sha256" if item.sha256 else "md5" if item.md5 else None
    want = (item.sha256 or item.md5 or "").lower()
    if publisher is not None and digests[publisher] != want:
        part.unlink()
        raise DownloadError(
            f"{dest}: {publisher} checksum mismatch (publisher {want}, received {digests[publisher]}); "
            f"the bad file was deleted, run again to download it afresh"
        )
    os.replace(part, dest)
    log.record(item.dest, size=got, sha256=digests["sha256"], publisher=publisher)
