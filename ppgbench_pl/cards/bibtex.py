"""BibTeX: write the entries of the cards, and read a ``.bib`` file back (the subset the writer uses) to check it."""

from __future__ import annotations

import re
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


class BibTeXError(ValueError):
    """A ``.bib`` text does not parse; the message says where."""


def render(citation: Citation) -> str:
    """One entry as BibTeX text (fields in the card's order, values in braces, then ``unconfirmed``)."""
    fields = citation.written_fields()
    width = max((len(name) for name, _ in fields), default=0)
    body = ",\n".join(f"  {name:<{width}} = {{{value}}}" for name, value in fields)
    return f"@{citation.entry_type}{{{citation.key},\n{body}\n}}\n"


def render_all(citations: Iterable[Citation]) -> str:
    """Several entries, each key once, in the order given, separated by blank lines."""
    seen: dict[str, Citation] = {}
    for citation in citations:
        seen.setdefault(citation.key, citation)
    return "\n".join(render(c) for c in seen.values())


_HEAD = re.compile(r"@\s*([A-Za-z]+)\s*([{(])\s*([^,\s]+)\s*,")
_FIELD = re.compile(r"\s*([A-Za-z][\w\-]*)\s*=\s*")


def _value(text: str, i: int) -> tuple[str, int]:
    """The value starting at ``text[i]`` (braced, quoted or a bare word/number) and the index after it."""
    if text[i] == "{":
        depth, j = 0, i
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i + 1:j], j + 1
            j += 1
        raise BibTeXError(f"unbalanced braces in a value starting at offset {i}")
    if text[i] == '"':
        j = text.find('"', i + 1)
        if j < 0:
            raise BibTeXError(f"unterminated quoted value at offset {i}")
        return text[i + 1:j], j + 1
    match = re.match(r"[\w\-.:/]+", text[i:])
    if not match:
        raise BibTeXError(f"expected a value at offset {i}")
    return match.group(0), i + match.end()


def _entry(text: str, start: int) -> tuple[str, dict[str, str], int]:
    """Parse one entry whose ``@`` is at ``start``: (key, fields with the type under ``ENTRYTYPE``, end)."""
    head = _HEAD.match(text, start)
    if not head:
        raise BibTeXError(f"malformed entry head at offset {start}")
    close = "}" if head.group(2) == "{" else ")"
    fields = {"ENTRYTYPE": head.group(1).lower()}
    i = head.end()
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i < len(text) and text[i] == close:
            return head.group(3), fields, i + 1
        match = _FIELD.match(text, i)
        if not match:
            raise BibTeXError(f"entry {head.group(3)}: malformed field at offset {i}")
        name = match.group(1).lower()
        if name in fields:
            raise BibTeXError(f"entry {head.group(3)}: field '{name}' given twice")
        fields[name], i = _value(text, match.end())


def parse(text: str) -> dict[str, dict[str, str]]:
    """Key -> fields (plus ``ENTRYTYPE``) of every entry; text outside entries is ignored, as BibTeX does.

    Raises:
        BibTeXError: An entry is malformed, or a key appears twice.

    """
    out: dict[str, dict[str, str]] = {}
    i = text.find("@")
    while i >= 0:
        key, fields, end = _entry(text, i)
        if key in out:
            raise BibTeXError(f"key '{key}' appears twice")
        out[key] = fields
        i = text.find("@", end)
    return out
