"""The cache folders (no torch here): where they live, their marker (deleting needs it), entries, LRU size cap."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import LockBusy, file_lock

#: The marker file of an embedding cache folder.
MARKER = ".ppgbench-cache.json"
#: What an entry's description and the marker say they are.
ENTRY_KIND = "embedding cache entry"
CACHE_KIND = "embedding cache"
_KEY = re.compile(r"[0-9a-f]{32}")
_TEMP = re.compile(r"\.([0-9a-f]{32}\.(npy|json)|" + re.escape(MARKER) + r")\..*\.tmp")


def cache_folder(explicit: str | Path | None, flag: str, env: str, name: str, kind: str) -> tuple[Path, str]:
    """(folder, the setting that named it): ``explicit``, ``$env``, or ``<XDG cache>/ppgbench/<name>``."""
    if explicit:
        return Path(explicit).expanduser().resolve(), flag
    if os.environ.get(env):
        return Path(os.environ[env]).expanduser().resolve(), f"${env}"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (base / "ppgbench" / name).resolve(), f"the default {kind}"


def read_description(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (a marker, a description), or None when it is missing, unreadable or not one."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def is_marked(root: Path, kind: str = CACHE_KIND, marker: str = MARKER) -> bool:
    """Whether ``root`` carries a readable ppgbench marker of a ``kind`` cache."""
    return (read_description(root / marker) or {}).get("ppgbench") == kind


def mark(root: Path, kind: str = CACHE_KIND, marker: str = MARKER) -> None:
    """Write the marker of a ``kind`` cache into ``root`` (unless it is there)."""
    if not is_marked(root, kind, marker):
        write_json_atomic(root / marker, {"ppgbench": kind, "format": 1,
                                          "created": datetime.now(UTC).isoformat(timespec="seconds")})


def require_marker(root: Path, kind: str = CACHE_KIND, marker: str = MARKER) -> None:
    """Refuse to delete anything in a folder without the marker (clear, eviction)."""
    if not is_marked(root, kind, marker):
        raise ConfigError(f"{root}: not a ppgbench {kind} (no {marker}); nothing was removed")


def is_own_entry(meta: Any, key: str) -> TypeGuard[dict[str, Any]]:
    """Whether a description names its file as a ppgbench entry of this cache (its key is the file's stem)."""
    return isinstance(meta, dict) and meta.get("ppgbench") == ENTRY_KIND and meta.get("key") == key


def _legacy_entry(array: Path) -> dict[str, Any] | None:
    """The description of an entry written before markers existed (or already tagged), else None."""
    if not _KEY.fullmatch(array.stem):
        return None
    try:
        size = array.stat().st_size
    except OSError:
        return None
    meta = read_description(array.with_suffix(".json")) or {}
    digest = meta.get("sha256")
    legacy = (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest) and isinstance(meta.get("shape"), list)
              and meta.get("bytes") == size)
    return meta if legacy or is_own_entry(meta, array.stem) else None  # own: an adoption cut short before its marker


def foreign_file(root: Path) -> str | None:
    """The first file of an unmarked ``root`` that is not an entry ppgbench wrote (None: all are, or empty)."""
    for path in sorted(root.iterdir()):
        ours = path.name == ".locks" and path.is_dir() or _TEMP.fullmatch(path.name)
        if not ours and (path.suffix not in (".npy", ".json") or _legacy_entry(path.with_suffix(".npy")) is None):
            return path.name
    return None


def check_folder(root: Path, setting: str | None = None) -> None:
    """Refuse (one line, nothing written) a cache location that is a file or a foreign folder (``setting``: named)."""
    where = f"{setting}={root}" if setting else f"embedding cache folder {root}"
    existing = next(p for p in (root, *root.parents) if p.exists())  # "/" at the latest
    if not existing.is_dir():
        what = "is a file" if existing == root else f"is inside {existing}, which is a file"
        raise ConfigError(f"{where}: {what}; the embedding cache needs a folder")
    if root.is_dir() and not is_marked(root) and (stray := foreign_file(root)) is not None:
        raise ConfigError(f"{where}: not a ppgbench embedding cache (no {MARKER}, and it holds {stray}, "
                          "which ppgbench did not write); point it at an empty or new folder")


def claim(root: Path) -> None:
    """Make ``root`` a marked cache folder: create it, mark an empty one, or adopt an old-format cache."""
    if is_marked(root):
        return
    check_folder(root)
    (root / ".locks").mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".locks" / "claim.lock"):
        if is_marked(root):
            return
        check_folder(root)
        adopted = 0
        for array in sorted(root.glob("*.npy")):
            meta = _legacy_entry(array)
            if meta is not None and not is_own_entry(meta, array.stem):
                write_json_atomic(array.with_suffix(".json"), {**meta, "ppgbench": ENTRY_KIND, "key": array.stem})
                adopted += 1
        mark(root)
    if adopted:
        print(f"embedding cache: adopted {adopted} entries written before cache markers in {root}", file=sys.stderr)


SIZE_ENV = "PPGBENCH_CACHE_GB"


def cache_root(explicit: str | Path | None = None) -> Path:
    """The cache folder (absolute): ``explicit``, ``$PPGBENCH_CACHE_DIR``, or user cache (a foreign one refused)."""
    root, setting = cache_folder(explicit, "--cache_dir", "PPGBENCH_CACHE_DIR", "embeddings", CACHE_KIND)
    check_folder(root, setting)
    return root


def size_cap_bytes(explicit_gb: float | None = None) -> float:
    """The cache's size cap in bytes (``--cache_size_gb``, ``$PPGBENCH_CACHE_GB`` or 100 GB)."""
    if explicit_gb is None and os.environ.get(SIZE_ENV):
        try:
            explicit_gb = float(os.environ[SIZE_ENV])
        except ValueError:
            raise ConfigError(f"{SIZE_ENV}={os.environ[SIZE_ENV]!r}: not a number of GB") from None
    gb = 100.0 if explicit_gb is None else float(explicit_gb)
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
            used, size = meta_path.stat().st_mtime, array.stat().st_size
        except OSError:
            continue
        if is_own_entry(meta := read_description(meta_path), array.stem):
            out.append({**meta, "key": array.stem, "bytes": size, "last_used": used})
    return sorted(out, key=lambda e: (e["last_used"], e["key"]))


def touch(root: Path, key: str) -> None:
    """Mark an entry as used now (its description's modification time is the LRU clock)."""
    with contextlib.suppress(OSError):  # read-only cache: the order is only less exact
        os.utime(root / f"{key}.json")


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
            if entry["key"] not in keep and remove(root, entry["key"]):
                total -= entry["bytes"]
                removed.append(entry["key"])
    return removed


def clear(root: str | Path) -> tuple[int, int]:
    """Remove every entry not in use (in a marked folder only); returns (removed, kept because in use)."""
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
