"""The marks the tables put after a score whose model may have seen the test data (cards/overlap.py).

A symbol per ``pretraining_overlap`` value, and the legend a caption gives for the ones its table shows.
Kept apart from :mod:`.overlap_page` (which recomputes the findings) so the table code imports only this.
"""

from __future__ import annotations

from collections.abc import Iterable

#: The marks of the cells; ``none`` has none, and ``unknown`` is said once per table (caption), not per cell,
#: since a model that declares nothing would otherwise mark every cell it has.
MARKS = {"direct": "‡", "source": "§"}
LEGEND = {
    "direct": "pretrained on this dataset",
    "source": "pretrained on a collection this dataset's recordings come from (possible patient overlap)",
}
#: Scores left out of the findings recomputed without overlap.
FLAGGED = ("direct", "source")


def mark(value: object) -> str:
    """The symbol of one cell's flag ('' for ``none``/``unknown`` and for tables of runs without the flag)."""
    return MARKS.get(str(value), "")


def legend(values: Iterable[object], unknown_models: Iterable[str] = ()) -> str:
    """`` Pretraining overlap: ‡ ...; § ...`` for the flags present, then the models whose data is unknown."""
    present = {str(v) for v in values}
    parts = [f"{MARKS[v]} {LEGEND[v]}" for v in MARKS if v in present]
    unknown = sorted(set(unknown_models))
    if unknown:
        parts.append(f"pretraining data unknown for {', '.join(unknown)}")
    return f" Pretraining overlap: {'; '.join(parts)} (model cards: ppgbench list encoders)." if parts else ""
