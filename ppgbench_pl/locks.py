"""Advisory file locks (``flock``; the kernel drops a dead holder's), so processes never do one thing twice.

The holder writes its PID, host, command and start into the file, so a waiting process says who holds it and
whether it progresses. ``$PPGBENCH_LOCK_TIMEOUT`` bounds a wait. Without ``fcntl`` (Windows) a lock is a no-op.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ppgbench_pl.errors import ConfigError, PPGBenchError

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: Whether locks exclude anything here (False without ``fcntl``: then a free lock proves nothing).
LOCKS_WORK = fcntl is not None
#: Seconds between two "still waiting" notices while a lock is held by another process.
NOTICE_EVERY_S = 60.0
#: Environment variable: seconds a blocking lock waits before :class:`LockTimeout` (unset or empty: wait).
TIMEOUT_ENV = "PPGBENCH_LOCK_TIMEOUT"


class LockBusy(RuntimeError):
    """A non-blocking lock attempt found the lock held by another process (or thread)."""


class LockTimeout(PPGBenchError):
    """A lock stayed held for longer than the wait limit (``--lock_timeout``); names the lock and holder."""


def _short(argv: list[str]) -> str:
    """A command line on one short line (the newlines of a ``-c`` program escaped)."""
    text = shlex.join(argv).replace("\n", "\\n")
    return text if len(text) <= 160 else text[:157] + "..."


def _proc_holder(path: Path) -> int | None:
    """The PID ``/proc/locks`` gives for an flock on ``path`` (Linux), else None."""
    try:
        st = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].count(":") == 2:
            major, minor, inode = fields[5].split(":")
            if (int(inode), int(major, 16), int(minor, 16)) == (st.st_ino, os.major(st.st_dev), os.minor(st.st_dev)):
                return int(fields[4])
    return None


def _holder(path: Path) -> tuple[int | None, str]:
    """(the holder's PID on this host, else None; who it is), from the lock file, else from ``/proc/locks``.

    A file naming another host still looks in ``/proc/locks``: a local process may hold the lock before it
    rewrote the file.
    """
    try:
        info = json.loads(path.read_text() or "{}")
        age = time.time() - float(info["since"])
        command = f" ({info['command']})" if info.get("command") else ""
        here = int(info["pid"]) if info["host"] == socket.gethostname() else _proc_holder(path)
        return here, f"pid {info['pid']} on {info['host']}{command}, for {age:.0f} s"
    except (OSError, ValueError, KeyError, TypeError):
        pid = _proc_holder(path)
    if pid is None:
        return None, "unknown"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        found = _short([a.decode(errors="replace") for a in argv if a])
    except OSError:
        found = ""
    return pid, f"pid {pid} on {socket.gethostname()}" + (f" ({found})" if found else "")


def lock_holder(path: str | Path) -> str:
    """Who holds a lock: ``pid 123 on host (command), for 42 s``, else from ``/proc``."""
    return _holder(Path(path))[1]


def cpu_state(pid: int) -> tuple[str, int] | None:
    """(state letter, CPU ticks used) of a process on this host from ``/proc/<pid>/stat``, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    return fields[0], int(fields[11]) + int(fields[12])


class _Watch:
    """Follows a holder between notices: no CPU used since the last look, or stopped, is no progress."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = _holder(path)[0]
        self.seen = cpu_state(self.pid) if self.pid is not None else None
        self.since = time.monotonic()

    def stuck(self) -> str:
        """A ``; the holder ...`` note when it made no progress since the last call, else ''."""
        pid = _holder(self.path)[0]
        now = cpu_state(pid) if pid is not None else None
        before, self.seen = (self.seen if pid == self.pid else None), now
        seconds, self.since = time.monotonic() - self.since, time.monotonic()
        self.pid = pid
        if now is None:
            return ""
        if now[0] in ("T", "t"):
            return "; the holder is stopped (SIGSTOP or a debugger) and makes no progress"
        if now[0] == "Z":
            return "; the holder is a zombie and makes no progress"
        if before is not None and now[1] == before[1]:
            return f"; the holder has used no CPU in the last {seconds:.0f} s and looks stuck (no progress)"
        return ""


@contextmanager
def waiting_at_most(seconds: float | None) -> Iterator[None]:
    """Blocking locks of this process and the workers it starts give up after ``seconds`` (None: wait)."""
    if seconds is None:
        yield
        return
    if not seconds >= 0 or seconds == float("inf"):
        raise ConfigError(f"--lock_timeout {seconds:g}: must be a number of seconds >= 0 (leave it unset to wait)")
    before = os.environ.get(TIMEOUT_ENV)
    os.environ[TIMEOUT_ENV] = f"{seconds:g}"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TIMEOUT_ENV, None)
        else:
            os.environ[TIMEOUT_ENV] = before


def _acquire(fd: int, path: Path, blocking: bool, notice_every_s: float) -> None:
    assert fcntl is not None
    start = last = time.monotonic()
    text = os.environ.get(TIMEOUT_ENV, "").strip() if blocking else ""
    try:
        limit = float(text) if text else None  # unset, empty or not a number: wait for ever
    except ValueError:
        limit = None
    watch: _Watch | None = None
    while True:  # poll, so a long wait can be reported with the holder's pid and age
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not blocking:
                raise LockBusy(f"{path} (held by {lock_holder(path)})") from None
            watch = watch or _Watch(path)
            if limit is not None and time.monotonic() - start >= limit:
                raise LockTimeout(f"--lock_timeout {limit:g}: gave up on the lock {path} after {limit:g} s: held by "
                                  f"{lock_holder(path)}{watch.stuck()}") from None
            if time.monotonic() - last >= notice_every_s:
                print(f"waiting for the lock {path}: held by {lock_holder(path)}{watch.stuck()}", file=sys.stderr)
                last = time.monotonic()
        time.sleep(0.05)


@contextmanager
def file_lock(path: str | Path, blocking: bool = True, notice_every_s: float = NOTICE_EVERY_S) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the block; ``LockBusy`` if held and not blocking."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            _acquire(fd, path, blocking, notice_every_s)
            os.ftruncate(fd, 0)
            command = _short([str(a) for a in getattr(sys, "orig_argv", None) or sys.argv])
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                      "since": time.time()}).encode(), 0)
        try:
            yield
        finally:
            if fcntl is not None:
                os.ftruncate(fd, 0)  # a free lock names no holder
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
