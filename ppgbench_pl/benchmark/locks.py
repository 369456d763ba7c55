"""Advisory file locks, so concurrent processes never compute one thing twice.

Two workers (of one run, of two runs on the same folder, or an orphan of a killed run) may reach the
same job or the same embedding-cache entry. Each takes an exclusive ``flock`` on a small lock file
first; the kernel drops the lock when its holder dies, so a killed process never leaves a stale lock
behind. On platforms without ``fcntl`` the lock is a no-op and only atomic renames protect the files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class LockBusy(RuntimeError):
    """A non-blocking lock attempt found the lock held by another process (or thread)."""


@contextmanager
def file_lock(path: str | Path, blocking: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    Separate ``open`` calls get separate locks, so two threads of one process exclude each other too.

    Args:
        path: Lock file; its folder is created when missing.
        blocking: Wait for the lock (default), or raise :class:`LockBusy` at once when it is held.

    Raises:
        LockBusy: ``blocking`` is False and another holder has the lock.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
            try:
                fcntl.flock(fd, flags)
            except BlockingIOError:
                raise LockBusy(str(path)) from None
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
