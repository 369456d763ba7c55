"""All-or-nothing, umask-respecting file writes (unique temporary file, fsync, chmod, rename) for every file."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from ppgbench_pl.errors import DataError


class DiskFull(DataError):
    """A write ran out of disk space; the message names the file, the space needed and what is free."""


def _disk_full(path: Path, needed: int | None) -> DiskFull:
    try:
        free = f"{shutil.disk_usage(path.parent).free:,} bytes free"
    except OSError:
        free = "free space unknown"
    need = f"needs about {needed:,} bytes, " if needed else ""
    return DiskFull(f"{path}: no space left on the device ({need}{free}); nothing was half-written: free some "
                    "space and run the same command again")


def current_umask() -> int:
    """Return the umask, read without changing it where Linux allows (``os.umask`` is process-wide)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def dir_mode() -> int:
    """Mode of a newly made folder under the umask (0755 under 022); ``mkdtemp`` alone gives 0700."""
    return 0o777 & ~current_umask()


@contextmanager
def atomic_open(path: str | Path, mode: str = "wb", size: int | None = None) -> Iterator[IO[Any]]:
    """Write ``path`` all-or-nothing (module docstring); ``DiskFull`` names the file when space runs out."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # as open() would give it (mkstemp gives 0600)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(path, size) from None
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Atomic, umask-respecting write of UTF-8 text."""
    data = text.encode("utf-8")
    with atomic_open(path, "wb", size=len(data)) as handle:
        handle.write(data)


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Atomic JSON write (non-finite floats become null) so readers never see half a file."""
    write_text_atomic(path, json.dumps(json_safe(payload), indent=2, sort_keys=False))


def save_npy_atomic(path: str | Path, array: np.ndarray) -> None:
    """Atomic ``np.save`` (no pickles) to exactly ``path``."""
    with atomic_open(path, "wb") as handle:
        np.save(handle, np.asarray(array), allow_pickle=False)


def json_safe(value: Any) -> Any:
    """Numpy scalars to Python, non-finite floats to null (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
