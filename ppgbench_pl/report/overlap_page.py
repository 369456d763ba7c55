"""The findings beside the pretraining-overlap flags: how many scores are flagged, and the findings without them.

Flagged (``direct``, ``source``) scores may be inflated; ``unknown`` ones are counted but kept. Writes
``tables/overlap_cells.csv`` and the lines for ``findings.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ppgbench_pl.cards.overlap import record_overlap
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report import findings
from ppgbench_pl.report.overlap_marks import FLAGGED, MARKS
from ppgbench_pl.report.scores import Scores

if TYPE_CHECKING:
    from ppgbench_pl.report.html import Page
    from ppgbench_pl.report.rules import Rule

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
