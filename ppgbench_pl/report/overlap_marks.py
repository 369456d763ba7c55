"""The marks the tables put after a score whose model may have seen the test data (cards/overlap.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: The marks of the cells; ``unknown`` is said once per table (caption), not per cell.
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


#: Columns of the report's other tables that name the model of a (task, model) cell.
MODEL_COLUMNS = ("model", "best_model", "model_a", "model_b", "better")


def cell_flags(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(task, model) -> ``pretraining_overlap`` of the records (older records: the model card's)."""
    from ppgbench_pl.cards.overlap import record_overlap

    flags: dict[tuple[str, str], str] = {}
    for record in records:
        flags.setdefault((str(record.get("task")), str(record.get("model"))), record_overlap(record))
    return flags


def marked(frame: pd.DataFrame, flags: Mapping[tuple[str, str], str],
           caption: str = "") -> tuple[pd.DataFrame, str]:
    """A table's page copy whose model names carry their cell's mark, and the caption with the legend.

    The CSV files keep the plain names; ``overlap_cells.csv`` and ``main_cells.csv`` hold the flags.
    """
    columns = [c for c in MODEL_COLUMNS if c in frame.columns]
    if frame.empty or "task" not in frame.columns or not columns:
        return frame, caption
    out, seen = frame.copy(), set()
    for column in columns:
        values = []
        for task, model in zip(out["task"], out[column], strict=True):
            flag = flags.get((str(task), str(model)), "")
            seen.add(flag)
            values.append(f"{model} {mark(flag)}" if mark(flag) else model)
        out[column] = values
    return out, caption + legend(seen & set(MARKS))
