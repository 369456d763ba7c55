"""Where the embedding cache lives, what it holds, and how it stays under its size cap (no torch here).

The root is ``--cache_dir``, ``$PPGBENCH_CACHE_DIR`` or ``<user cache>/ppgbench/embeddings``; the cap
(``--cache_size_gb``, ``$PPGBENCH_CACHE_GB``, 100 GB) is kept by evicting least recently used entries, never
one held under its lock by another process. Each run folder links the entries it used in ``embeddings/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.benchmark.cache_owner import CACHE_KIND, cache_folder, check_folder, is_own_entry, require_marker
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import LockBusy, file_lock

CACHE_ENV = "PPGBENCH_CACHE_DIR"
SIZE_ENV = "PPGBENCH_CACHE_GB"
DEFAULT_SIZE_GB = 100.0


def cache_root(explicit: str | Path | None = None) -> Path:
    """The cache folder (absolute): ``explicit``, the environment variable, or the user cache directory.

    Raises:
        ConfigError: It is a file, or a folder of files ppgbench did not write (nothing is written first).
    """
    root, setting = cache_folder(explicit, "--cache_dir", CACHE_ENV, "embeddings", CACHE_KIND)
    check_folder(root, setting)
    return root


def size_cap_bytes(explicit_gb: float | None = None) -> float:
    """The cache's size cap in bytes (``--cache_size_gb``, ``$PPGBENCH_CACHE_GB`` or 100 GB)."""
    if explicit_gb is None and os.environ.get(SIZE_ENV):
        try:
            explicit_gb = float(os.environ[SIZE_ENV])
        except ValueError:
            raise ConfigError(f"{SIZE_ENV}={os.environ[SIZE_ENV]!r}: not a number of GB") from None
    gb = DEFAULT_SIZE_GB if explicit_gb is None else float(explicit_gb)
    if not gb > 0:
        raise ConfigError(f"--cache_size_gb must be positive, got {gb:g}")
    return gb * 1e9


def entry_lock(root: Path, key: str) -> Path:
    """The lock file of one entry (held while it is computed, evicted or removed)."""
    return root / ".locks" / f"{key}.lock"


def entries(root: str | Path) -> list[dict[str, Any]]:
    """The cache's own entries (no other file is listed, evicted or cleared) with bytes and last use, oldest first."""
    root = Path(root)
    out = []
    for array in root.glob("*.npy") if root.is_dir() else []:
        meta_path = array.with_suffix(".json")
        try:
            meta = json.loads(meta_path.read_text())
            used = meta_path.stat().st_mtime
            size = array.stat().st_size
        except (OSError, ValueError):
            continue
        if is_own_entry(meta, array.stem):
            out.append({**meta, "key": array.stem, "bytes": size, "last_used": used})
    return sorted(out, key=lambda e: (e["last_used"], e["key"]))


def touch(root: Path, key: str) -> None:
    """Mark an entry as used now (its description's modification time is the LRU clock)."""
    try:
        os.utime(root / f"{key}.json")
    except OSError:
        pass  # read-only cache: the order is only less exact


def remove(root: Path, key: str) -> bool:
    """Delete one entry unless another process holds its lock; True when it was removed."""
    try:
        with file_lock(entry_lock(root, key), blocking=False):
            (root / f"{key}.npy").unlink(missing_ok=True)
            (root / f"{key}.json").unlink(missing_ok=True)
    except LockBusy:
        return False
    return True


def evict(root: str | Path, cap_bytes: float, keep: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Remove least recently used entries until the cache holds at most ``cap_bytes``; returns their keys."""
    root = Path(root)
    require_marker(root)
    removed: list[str] = []
    with file_lock(root / ".locks" / "evict.lock"):
        found = entries(root)
        total = sum(e["bytes"] for e in found)
        for entry in found:
            if total <= cap_bytes:
                break
            if entry["key"] in keep:
                continue
            if remove(root, entry["key"]):
                total -= entry["bytes"]
                removed.append(entry["key"])
    return removed


def clear(root: str | Path) -> tuple[int, int]:
    """Remove every entry not in use; returns (removed, kept because in use).

    Raises:
        ConfigError: ``root`` is not a marked cache folder (nothing is removed).
    """
    root = Path(root)
    require_marker(root)
    keys = [e["key"] for e in entries(root)]
    removed = sum(remove(root, k) for k in keys)
    return removed, len(keys) - removed


def record_use(run_dir: str | Path, root: Path, key: str, describe: dict[str, Any]) -> None:
    """Write ``<run_dir>/embeddings/<key>.json`` and link ``<key>.npy`` to the shared entry (atomically)."""
    folder = Path(run_dir) / "embeddings"
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / f"{key}.json", {**describe, "key": key, "cache": str(root / f"{key}.npy")})
    link, target = folder / f"{key}.npy", root / f"{key}.npy"
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    temp = folder / f".{key}.{os.getpid()}.link"
    try:
        temp.unlink(missing_ok=True)
        os.symlink(target, temp)
        os.replace(temp, link)
    except OSError:  # a file system without links: the description alone says which entry was used
        temp.unlink(missing_ok=True)
