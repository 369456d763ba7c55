"""File names built from strings of an input (regime names, ...): never a path, never a hidden file.

A plain name is kept (``main_linear.csv``); any other keeps its safe characters plus a digest of the whole name.
"""

from __future__ import annotations

import hashlib
import re

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def safe_stem(name: str) -> str:
    """A file-name part for ``name``: itself when plain, else its safe characters and an 8-hex digest."""
    if _PLAIN.fullmatch(name) and ".." not in name:
        return name
    kept = _UNSAFE.sub("_", name).strip("_")[:40] or "name"
    return f"{kept}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
