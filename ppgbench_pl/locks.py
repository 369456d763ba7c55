"""Advisory file locks, so concurrent processes never compute or write one thing twice.

The one lock of the package: benchmark jobs, embedding-cache entries and ``run.json`` (benchmark/), the
processed store's build folders and the downloader's raw folders (data/) all take it. Each holder takes an
exclusive ``flock`` on a small lock file; the kernel drops the lock when its holder dies, so a dead
holder's lock is taken over at once and never goes stale. The holder writes its PID, host and start time
into the file (and clears it on release), so a process that waits for, or is refused, a lock held by a
stuck process says who holds it and for how long. On platforms without ``fcntl`` the lock is a no-op
(:data:`LOCKS_WORK` is False) and only atomic renames protect the files.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: Whether locks exclude anything here (False without ``fcntl``: then a free lock proves nothing).
LOCKS_WORK = fcntl is not None
#: Seconds between two "still waiting" notices while a lock is held by another process.
NOTICE_EVERY_S = 60.0


class LockBusy(RuntimeError):
    """A non-blocking lock attempt found the lock held by another process (or thread)."""


def lock_holder(path: str | Path) -> str:
    """Who holds a lock, as its holder wrote it (``pid 123 on host, for 42 s``), or ``unknown``."""
    try:
        info = json.loads(Path(path).read_text() or "{}")
        age = time.time() - float(info["since"])
        return f"pid {info['pid']} on {info['host']}, for {age:.0f} s"
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


def _acquire(fd: int, path: Path, blocking: bool, notice_every_s: float) -> None:
    assert fcntl is not None
    last = time.monotonic()
    while True:  # poll, so a long wait can be reported with the holder's pid and age
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not blocking:
                raise LockBusy(f"{path} (held by {lock_holder(path)})") from None
            if time.monotonic() - last >= notice_every_s:
                print(f"waiting for the lock {path}: held by {lock_holder(path)}", file=sys.stderr)
                last = time.monotonic()
        time.sleep(0.05)


@contextmanager
def file_lock(path: str | Path, blocking: bool = True, notice_every_s: float = NOTICE_EVERY_S) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    Separate ``open`` calls get separate locks, so two threads of one process exclude each other too.

    Args:
        path: Lock file; its folder is created when missing.
        blocking: Wait for the lock (default), or raise :class:`LockBusy` at once when it is held.
        notice_every_s: While waiting, say every so many seconds who holds the lock.

    Raises:
        LockBusy: ``blocking`` is False and another holder has the lock.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            _acquire(fd, path, blocking, notice_every_s)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                      "since": time.time()}).encode(), 0)
        try:
            yield
        finally:
            if fcntl is not None:
                os.ftruncate(fd, 0)  # a free lock names no holder
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
