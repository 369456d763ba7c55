"""File names built from strings of an input (regime names, ...): never a path, never a hidden file.

A run folder or an exported file may come from anyone, so a regime called ``../../x`` must not write
outside ``tables/`` or ``figures/``. A plain name (letters, digits, ``_ . -``, not starting with a dot)
is kept as it is, so the published names give the files they always gave (``main_linear.csv``); any other
name keeps its safe characters and gains a digest of the whole name, so two names never share a file.
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
