"""BibTeX: the entries of the cards as ``.bib`` text (tests read it back with pybtex, a real BibTeX parser)."""

from __future__ import annotations

from collections.abc import Iterable

import ppgbench_pl
from ppgbench_pl.cards.types import Citation

#: The benchmark itself (no paper yet: the software, at the installed version).
BENCHMARK = Citation("ppgbench", "software", (
    ("author", "{ppgbench contributors}"),
    ("title", "ppgbench: One Controlled Protocol for Evaluating {PPG} Foundation Models"),
    ("year", "2026"),
    ("version", ppgbench_pl.__version__),
    ("note", "Python package ppgbench"),
))


def render(citation: Citation) -> str:
    """One entry as BibTeX text (fields in the card's order, values in braces, then ``unconfirmed`` if any is)."""
    fields = (*citation.fields, *((("unconfirmed", ", ".join(citation.unconfirmed)),) if citation.unconfirmed else ()))
    width = max((len(name) for name, _ in fields), default=0)
    body = ",\n".join(f"  {name:<{width}} = {{{value}}}" for name, value in fields)
    return f"@{citation.entry_type}{{{citation.key},\n{body}\n}}\n"


def render_all(citations: Iterable[Citation]) -> str:
    """Several entries, each key once, in the order given, separated by blank lines."""
    seen: dict[str, Citation] = {}
    for citation in citations:
        seen.setdefault(citation.key, citation)
    return "\n".join(render(c) for c in seen.values())
