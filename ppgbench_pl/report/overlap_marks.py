"""Pretraining overlap in the report: the marks after a flagged score (cards/overlap.py), and the findings.

Flagged (``direct``, ``source``) scores may be inflated: the headline is recomputed without them;
``unknown`` ones are counted but kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ppgbench_pl.cards.overlap import record_overlap
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report import findings
from ppgbench_pl.report.scores import Scores

if TYPE_CHECKING:
    from ppgbench_pl.report.compare import Rule
    from ppgbench_pl.report.html import Page

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


COLUMNS = ["regime", "task", "model", "pretraining_overlap", "mark"]


@dataclass
class OverlapFindings:
    """Counts per flag, the flagged scores, the headline without the flagged ones, and the count lines."""

    counts: dict[str, int]
    n_scores: int
    cells: pd.DataFrame
    clean: findings.Headline | None
    lines: list[str]
    written: list[Path] = field(default_factory=list)


def _scores_by_flag(scores: Scores) -> pd.DataFrame:
    summary = scores.summary
    if "pretraining_overlap" not in summary:
        return pd.DataFrame(columns=COLUMNS)
    part = summary[~summary["model"].map(is_baseline) & (summary["pretraining_overlap"] != "none")]
    frame = part[["regime", "task", "model", "pretraining_overlap"]].copy()
    frame["mark"] = frame["pretraining_overlap"].map(lambda v: MARKS.get(v, "unknown"))
    return frame.reset_index(drop=True)


def _lines(counts: dict[str, int], n_scores: int, clean: findings.Headline | None, n_kept: int) -> list[str]:
    flagged = sum(counts.get(v, 0) for v in FLAGGED)
    out = [f"Pretraining overlap: {flagged} of {n_scores} model x task x regime scores are flagged "
           f"({counts.get('direct', 0)} ‡ pretrained on the test dataset, {counts.get('source', 0)} § on its "
           f"source database); {counts.get('unknown', 0)} have unknown pretraining data (kept below)."]
    if flagged and clean is not None:
        first = clean.lines()[:2]
        out += [f"Without the {flagged} flagged scores ({n_kept} kept): {first[0]}", f"Without them: {first[1]}"]
    elif flagged:
        out.append("Without the flagged scores nothing is left to judge.")
    return out


def compute(scores: Scores, records: list[dict[str, Any]], rule: Rule, out: Path) -> OverlapFindings:
    """Count the flags, recompute the headline from the unflagged records, write ``overlap_cells.csv``."""
    from ppgbench_pl.report.folder import write_tables

    cells = _scores_by_flag(scores)
    counts = {str(k): int(v) for k, v in cells["pretraining_overlap"].value_counts().items()}
    n_scores = int((~scores.summary["model"].map(is_baseline)).sum())
    clean = None
    if any(counts.get(v) for v in FLAGGED):
        kept = [r for r in records if record_overlap(r) not in FLAGGED]
        if kept:
            clean_scores = Scores(kept, scores.ci_unit)
            clean = findings.headline(findings.chance_cells(clean_scores, rule),
                                      findings.control_cells(clean_scores, rule), rule)
    n_kept = n_scores - sum(counts.get(v, 0) for v in FLAGGED)
    return OverlapFindings(counts, n_scores, cells, clean, _lines(counts, n_scores, clean, n_kept),
                           write_tables(out, {"overlap_cells": cells}))


def draw(page: Page, result: OverlapFindings) -> None:
    """The overlap counts as bullets, and the flagged scores in a collapsed table."""
    from ppgbench_pl.report.html import table

    page.heading("Pretraining overlap", level=3, anchor="overlap")
    page.bullets(result.lines, "findings")
    if not result.cells.empty:
        page.details(f"Scores with a pretraining-overlap flag or unknown pretraining data: {len(result.cells)}",
                     table(result.cells, "‡ direct, § source: from each model's card "
                                         "(ppgbench list encoders) and each dataset's derived_from."))
