"""Parse BibTeX with pybtex, a BibTeX-compatible processor (not ppgbench's own reader), in strict mode."""

from __future__ import annotations

from typing import Any


def pybtex_entries(text: str) -> dict[str, Any]:
    """Key -> pybtex entry; any BibTeX syntax error or duplicate key raises instead of being skipped."""
    import pybtex.errors
    from pybtex.database import parse_string

    strict = pybtex.errors.strict
    pybtex.errors.set_strict_mode(True)
    try:
        return dict(parse_string(text, "bibtex").entries)
    finally:
        pybtex.errors.set_strict_mode(strict)
