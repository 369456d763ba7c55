"""Which folder is a ppgbench cache (embeddings or weights), and which files in an embedding cache are its entries.

A cache folder carries a marker (``{"ppgbench": <kind>}``) written when ppgbench creates or first uses it;
deleting (``cache clear``, LRU eviction) needs it, so a mistyped ``--cache_dir`` deletes nothing. An
unmarked embedding folder of the format before markers (``<32 hex>.npy`` beside a ``.json`` holding its
``sha256``, ``shape`` and ``bytes``) is adopted; any other file makes the folder foreign (refused in one line).
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import file_lock

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


def is_own_entry(meta: Any, key: str) -> bool:
    """Whether a description names its file as a ppgbench entry of this cache (its key is the file's stem)."""
    return isinstance(meta, dict) and meta.get("ppgbench") == ENTRY_KIND and meta.get("key") == key


def _legacy_entry(array: Path) -> dict[str, Any] | None:
    """The description of an entry written before markers existed (or already tagged), else None."""
    if not _KEY.fullmatch(array.stem):
        return None
    try:
        meta = json.loads(array.with_suffix(".json").read_text())
        size = array.stat().st_size
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    if is_own_entry(meta, array.stem):  # tagged by an adoption cut short before its marker was written
        return meta
    digest, shape = meta.get("sha256"), meta.get("shape")
    if (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest) and isinstance(shape, list)
            and meta.get("bytes") == size):
        return meta
    return None


def foreign_file(root: Path) -> str | None:
    """The first file of an unmarked ``root`` that is not an entry ppgbench wrote (None: all are, or empty)."""
    for path in sorted(root.iterdir()):
        name = path.name
        if name == ".locks" and path.is_dir() or _TEMP.fullmatch(name):
            continue
        if path.suffix in (".npy", ".json") and _legacy_entry(path.with_suffix(".npy")) is not None:
            continue
        return name
    return None


def check_folder(root: Path, setting: str | None = None) -> None:
    """Refuse (one line, nothing written) a cache location that is a file or a foreign folder.

    Args:
        root: The cache folder (absolute).
        setting: Where it came from (``--cache_dir``, ``$PPGBENCH_CACHE_DIR``...), for the message.
    """
    where = f"{setting}={root}" if setting else f"embedding cache folder {root}"
    existing = next(p for p in (root, *root.parents) if p.exists())  # "/" at the latest
    if not existing.is_dir():
        what = "is a file" if existing == root else f"is inside {existing}, which is a file"
        raise ConfigError(f"{where}: {what}; the embedding cache needs a folder")
    if root.is_dir() and not is_marked(root):
        stray = foreign_file(root)
        if stray is not None:
            raise ConfigError(f"{where}: not a ppgbench embedding cache (no {MARKER}, and it holds {stray}, "
                              "which ppgbench did not write); point it at an empty or new folder")


def claim(root: Path) -> None:
    """Make ``root`` a marked cache folder: create it, or mark an empty one, or adopt an old-format cache.

    Raises:
        ConfigError: ``root`` holds files ppgbench did not write (see :func:`check_folder`).
    """
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
