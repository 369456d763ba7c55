"""Which folder is an embedding cache and which files in it are its entries (no torch here).

A cache folder carries :data:`MARKER`, written by ppgbench when it creates the folder or first uses an
empty one, and each entry's description names it (``"ppgbench": ENTRY_KIND`` and its ``key``, the file's
stem). ``ppgbench cache clear`` and LRU eviction touch only such entries, and only in a marked folder: a
typo in ``--cache_dir`` or ``$PPGBENCH_CACHE_DIR`` pointing at a data folder deletes nothing.

A folder from before markers existed is adopted (marker written, descriptions tagged) when everything in it
is a recognisable entry of the old format: ``<32 hex>.npy`` beside ``<32 hex>.json`` holding the entry's
``sha256``, ``shape`` and ``bytes`` (the npy's size), plus the lock folder and temporary files of ppgbench's
atomic writes. Any other file makes the folder foreign: it is refused in one line, nothing written.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import file_lock

#: The marker file of a cache folder.
MARKER = ".ppgbench-cache.json"
#: What an entry's description and the marker say they are.
ENTRY_KIND = "embedding cache entry"
CACHE_KIND = "embedding cache"
_KEY = re.compile(r"[0-9a-f]{32}")
_TEMP = re.compile(r"\.([0-9a-f]{32}\.(npy|json)|" + re.escape(MARKER) + r")\..*\.tmp")


def is_marked(root: Path) -> bool:
    """Whether ``root`` carries a readable ppgbench cache marker."""
    try:
        found = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and found.get("ppgbench") == CACHE_KIND


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
        if path.suffix == ".npy" and _legacy_entry(path) is not None:
            continue
        if path.suffix == ".json" and path.with_suffix(".npy").exists() and \
                _legacy_entry(path.with_suffix(".npy")) is not None:
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
    for path in (root, *root.parents):
        if path.exists() and not path.is_dir():
            what = "is a file" if path == root else f"is inside {path}, which is a file"
            raise ConfigError(f"{where}: {what}; the embedding cache needs a folder")
        if path.exists():
            break
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
        write_json_atomic(root / MARKER, {"ppgbench": CACHE_KIND, "format": 1,
                                          "created": datetime.now(UTC).isoformat(timespec="seconds")})
    if adopted:
        print(f"embedding cache: adopted {adopted} entries written before cache markers in {root}", file=sys.stderr)


def require_marker(root: Path) -> None:
    """Refuse to delete anything in a folder without the marker (clear, eviction)."""
    if not is_marked(root):
        raise ConfigError(f"{root}: not a ppgbench embedding cache (no {MARKER}); nothing was removed")
