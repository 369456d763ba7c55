"""Headline findings (cells near chance, cells where the controls hold) and the pretraining-overlap marks.

A control not run in a cell is not required there; the headline is recomputed without the flagged scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.cards.overlap import record_overlap
from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.folder import Page, table, write_tables
from ppgbench_pl.report.load import CONTROL_MODELS, LEGACY_CONTROLS, RENAMED_CONTROLS, is_control

#: The PRV and MOMENT controls, under their current and their legacy names.
FEATURE_CONTROLS = tuple(c for c in (*CONTROL_MODELS, *LEGACY_CONTROLS) if not is_baseline(c))
CHANCE_COLUMNS = ["regime", "task", "metric", "baseline", "baseline_mean", "baseline_ci95", "best_model",
                  "best_mean", "beat_baseline", "status"]
CONTROL_COLUMNS = ["regime", "task", "ppg_models", "controls", "winners", "status"]


def _status(verdicts: Iterable[bool | None], yes: str, no: str) -> str:
    """Several beats() verdicts in one: any True wins, else any None is undetermined."""
    verdicts = list(verdicts)
    if any(v is True for v in verdicts):
        return yes
    return "undetermined" if any(v is None for v in verdicts) else no


def chance_cells(scores: Scores, rule: Rule) -> pd.DataFrame:
    """One row per cell: the baseline(s) (several task views: no mean/CI), the best model, who beats it, status."""
    rows = []
    for regime, task in scores.cells():
        names = scores.baselines(task, regime)
        base = scores.get(task, regime, names[0]) if len(names) == 1 else None
        best = scores.best(task, regime)
        models = [s.model for s in scores.cell(task, regime) if not is_baseline(s.model)]
        verdicts = {m: rule.beats(scores, task, regime, m, BASELINE_MODEL) for m in models}
        status = _status(verdicts.values(), "above_chance", "near_chance") if names else "no_baseline"
        rows.append({"regime": regime, "task": task, "metric": scores.metric[task], "baseline": ";".join(names),
                     "baseline_mean": base.mean if base else float("nan"),
                     "baseline_ci95": base.ci95 if base else float("nan"),
                     "best_model": best.model if best else "", "best_mean": best.mean if best else float("nan"),
                     "beat_baseline": ";".join(m for m, v in verdicts.items() if v), "status": status})
    return pd.DataFrame(rows, columns=CHANCE_COLUMNS)


def control_cells(scores: Scores, rule: Rule) -> pd.DataFrame:
    """One row per cell: PPG-specific models, controls present, which models beat them all, and status."""
    rows = []
    for regime, task in scores.cells():
        present = [s.model for s in scores.cell(task, regime)]
        ppg = [m for m in present if not is_control(m)]
        controls = [m for m in present if m in FEATURE_CONTROLS]
        per_model: dict[str, bool | None] = {}
        for model in ppg:
            verdicts = [rule.beats(scores, task, regime, model, c) for c in controls]
            per_model[model] = False if False in verdicts else (None if None in verdicts else True)
        status = ("no_controls" if not controls else "no_ppg_model" if not ppg
                  else _status(per_model.values(), "beaten", "not_beaten"))
        rows.append({"regime": regime, "task": task, "ppg_models": ";".join(ppg), "controls": ";".join(controls),
                     "winners": ";".join(m for m, v in per_model.items() if v), "status": status})
    return pd.DataFrame(rows, columns=CONTROL_COLUMNS)


@dataclass(frozen=True)
class Headline:
    """The counts the report leads with, and the cells behind them."""

    n_cells: int
    near_chance: list[tuple[str, str]]
    undetermined_chance: list[tuple[str, str]]
    n_assessable: int
    controls_hold: list[tuple[str, str]]
    not_assessable: list[tuple[str, str]]
    rule_text: str
    controls_seen: list[str]
    no_baseline: list[tuple[str, str]] = field(default_factory=list)
    undetermined_controls: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The findings as sentences (page and command): near chance among judged cells, controls among decided."""
        judged = self.n_cells - len(self.undetermined_chance) - len(self.no_baseline)
        if judged <= 0:
            why = ("a CI or paired test needs at least two seeds" if self.undetermined_chance
                   else "no cell has a constant baseline")
            out = [f"Near chance: undetermined in all {self.n_cells} task x regime cells ({why}); no cell is "
                   "judged near or above chance."]
        else:
            scope = "judged " if judged < self.n_cells else ""
            out = [f"{len(self.near_chance)} of {judged} {scope}task x regime cells are near chance: no model "
                   "meaningfully beats the constant baseline."]
        seen = ", ".join(self.controls_seen) or "none"
        ran = {RENAMED_CONTROLS.get(c, c) for c in self.controls_seen}
        absent = [c for c in FEATURE_CONTROLS if c not in LEGACY_CONTROLS and c not in ran]
        missing = f"; not run: {', '.join(absent)}, so not required" if absent else ""
        decided = self.n_assessable - len(self.undetermined_controls)
        if self.n_assessable == 0:
            out.append(f"Controls: no cell has both a PRV/MOMENT control and a PPG-specific model, so none is "
                       f"assessed (controls run: {seen}{missing}).")
        elif decided == 0:
            out.append(f"Controls: undetermined in all {self.n_assessable} assessable cells (a CI or paired test "
                       f"needs at least two seeds; controls run: {seen}{missing}).")
        else:
            scope = "decided " if decided < self.n_assessable else ""
            out.append(f"In {len(self.controls_hold)} of {decided} {scope}assessable cells, no PPG-specific model "
                       f"meaningfully beats both the PRV and the MOMENT control (controls run: {seen}{missing}).")
        if self.undetermined_chance and judged > 0:
            out.append(f"{len(self.undetermined_chance)} cells could not be judged against chance "
                       "(a CI or paired test needs at least two seeds).")
        if self.undetermined_controls and len(self.undetermined_controls) < self.n_assessable:
            out.append(f"{len(self.undetermined_controls)} assessable cells could not be decided against the "
                       "controls (a CI or paired test needs at least two seeds).")
        if self.not_assessable:
            out.append(f"{len(self.not_assessable)} cells lack a PRV/MOMENT control or a PPG-specific model "
                       "and are left out of the control count.")
        out.append(f"Meaningfully better = {self.rule_text}.")
        return out


def headline(chance: pd.DataFrame, controls: pd.DataFrame, rule: Rule) -> Headline:
    """Count the cells of :func:`chance_cells` and :func:`control_cells`."""
    def cells(frame: pd.DataFrame, *status: str) -> list[tuple[str, str]]:
        part = frame[frame["status"].isin(status)]
        return list(zip(part["task"], part["regime"], strict=True))

    seen = {c for row in controls["controls"] for c in str(row).split(";") if c}
    assessable = controls[controls["status"].isin(("beaten", "not_beaten", "undetermined"))]
    return Headline(len(chance), cells(chance, "near_chance"), cells(chance, "undetermined"), len(assessable),
                    cells(controls, "not_beaten"), cells(controls, "no_controls", "no_ppg_model"), rule.text,
                    [c for c in FEATURE_CONTROLS if c in seen], cells(chance, "no_baseline"),
                    cells(controls, "undetermined"))


def append_section(findings_md: Path, title: str, lines: list[str]) -> None:
    """Add ``## title`` and ``lines`` as bullets to ``findings.md`` (nothing when there are no lines)."""
    if not lines:
        return
    text = findings_md.read_text(encoding="utf-8").rstrip("\n")
    write_text_atomic(findings_md, text + f"\n\n## {title}\n\n" + "\n".join(f"- {x}" for x in lines) + "\n")


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
    if unknown := sorted(set(unknown_models)):
        parts.append(f"pretraining data unknown for {', '.join(unknown)}")
    return f" Pretraining overlap: {'; '.join(parts)} (model cards: ppgbench list encoders)." if parts else ""


#: Columns of the report's other tables that name the model of a (task, model) cell.
MODEL_COLUMNS = ("model", "best_model", "model_a", "model_b", "better")


def cell_flags(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(task, model) -> ``pretraining_overlap`` of its first record (older records: the model card's)."""
    return {(str(r.get("task")), str(r.get("model"))): record_overlap(r) for r in reversed(list(records))}


def marked(frame: pd.DataFrame, flags: Mapping[tuple[str, str], str],
           caption: str = "") -> tuple[pd.DataFrame, str]:
    """A table's page copy whose model names carry their cell's mark (the CSVs keep plain names), caption + legend."""
    columns = [c for c in MODEL_COLUMNS if c in frame.columns]
    if frame.empty or "task" not in frame.columns or not columns:
        return frame, caption
    out, seen = frame.copy(), set()
    for column in columns:
        found = [flags.get((str(task), str(model)), "") for task, model in zip(out["task"], out[column], strict=True)]
        seen |= set(found)
        out[column] = [f"{m} {mark(f)}" if mark(f) else m for m, f in zip(out[column], found, strict=True)]
    return out, caption + legend(seen & set(MARKS))


@dataclass
class OverlapFindings:
    """The flagged scores, the count lines (with the headline without the flagged ones) and the files."""

    cells: pd.DataFrame
    lines: list[str]
    written: list[Path] = field(default_factory=list)


def compute(scores: Scores, records: list[dict[str, Any]], rule: Rule, out: Path) -> OverlapFindings:
    """Count the flags, recompute the headline from the unflagged records, write ``overlap_cells.csv``."""
    summary = scores.summary
    part = summary[~summary["model"].map(is_baseline) & (summary["pretraining_overlap"] != "none")]
    cells = part[["regime", "task", "model", "pretraining_overlap"]].reset_index(drop=True)
    cells["mark"] = cells["pretraining_overlap"].map(lambda v: MARKS.get(v, "unknown"))
    counts = {str(k): int(v) for k, v in cells["pretraining_overlap"].value_counts().items()}
    n_scores = int((~summary["model"].map(is_baseline)).sum())
    flagged = sum(counts.get(v, 0) for v in FLAGGED)
    lines = [f"Pretraining overlap: {flagged} of {n_scores} model x task x regime scores are flagged "
             f"({counts.get('direct', 0)} ‡ pretrained on the test dataset, {counts.get('source', 0)} § on its "
             f"source database); {counts.get('unknown', 0)} have unknown pretraining data (kept below)."]
    kept = [r for r in records if record_overlap(r) not in FLAGGED]
    if flagged and kept:
        clean = Scores(kept, scores.ci_unit)
        first = headline(chance_cells(clean, rule), control_cells(clean, rule), rule).lines()[:2]
        lines += [f"Without the {flagged} flagged scores ({n_scores - flagged} kept): {first[0]}",
                  f"Without them: {first[1]}"]
    elif flagged:
        lines.append("Without the flagged scores nothing is left to judge.")
    return OverlapFindings(cells, lines, write_tables(out, {"overlap_cells": cells}))


def draw(page: Page, result: OverlapFindings) -> None:
    """The overlap counts as bullets, and the flagged scores in a collapsed table."""
    page.heading("Pretraining overlap", level=3, anchor="overlap")
    page.bullets(result.lines, "findings")
    if not result.cells.empty:
        page.details(f"Scores with a pretraining-overlap flag or unknown pretraining data: {len(result.cells)}",
                     table(result.cells, "‡ direct, § source: from each model's card "
                                         "(ppgbench list encoders) and each dataset's derived_from."))
