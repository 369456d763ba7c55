"""Headline findings: cells near chance, and cells where the controls hold (docs/report.md, "The rules").

Both use the one :class:`~ppgbench_pl.report.compare.Rule`. A control not run in a cell is not required there;
a cell without a PRV/MOMENT control or without a PPG-specific model is left out of the control count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report.compare import Rule
from ppgbench_pl.report.load import CONTROL_MODELS, LEGACY_CONTROLS, RENAMED_CONTROLS, is_control
from ppgbench_pl.report.scores import Scores

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
    for regime in scores.regimes:
        for task in scores.tasks(regime):
            names = scores.baselines(task, regime)
            base = scores.get(task, regime, names[0]) if len(names) == 1 else None
            best = scores.best(task, regime)
            models = [s.model for s in scores.cell(task, regime) if not is_baseline(s.model)]
            verdicts = {m: rule.beats(scores, task, regime, m, BASELINE_MODEL) for m in models}
            winners = [m for m, v in verdicts.items() if v]
            status = _status(verdicts.values(), "above_chance", "near_chance") if names else "no_baseline"
            rows.append({
                "regime": regime, "task": task, "metric": scores.metric[task], "baseline": ";".join(names),
                "baseline_mean": base.mean if base else float("nan"),
                "baseline_ci95": base.ci95 if base else float("nan"),
                "best_model": best.model if best else "", "best_mean": best.mean if best else float("nan"),
                "beat_baseline": ";".join(winners), "status": status,
            })
    return pd.DataFrame(rows, columns=CHANCE_COLUMNS)


def control_cells(scores: Scores, rule: Rule) -> pd.DataFrame:
    """One row per cell: PPG-specific models, controls present, which models beat them all, and status."""
    rows = []
    for regime in scores.regimes:
        for task in scores.tasks(regime):
            present = [s.model for s in scores.cell(task, regime)]
            ppg = [m for m in present if not is_control(m)]
            controls = [m for m in present if m in FEATURE_CONTROLS]
            per_model: dict[str, bool | None] = {}
            for model in ppg:
                verdicts = [rule.beats(scores, task, regime, model, c) for c in controls]
                per_model[model] = False if False in verdicts else (None if None in verdicts else True)
            winners = [m for m, v in per_model.items() if v]
            status = ("no_controls" if not controls else "no_ppg_model" if not ppg
                      else _status(per_model.values(), "beaten", "not_beaten"))
            rows.append({"regime": regime, "task": task, "ppg_models": ";".join(ppg),
                         "controls": ";".join(controls), "winners": ";".join(winners), "status": status})
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

    def chance_line(self) -> str:
        """How many judged cells are near chance; ``undetermined`` when none could be judged."""
        judged = self.n_cells - len(self.undetermined_chance) - len(self.no_baseline)
        if judged <= 0:
            why = ("a CI or paired test needs at least two seeds" if self.undetermined_chance
                   else "no cell has a constant baseline")
            return (f"Near chance: undetermined in all {self.n_cells} task x regime cells ({why}); no cell is "
                    "judged near or above chance.")
        scope = "judged " if judged < self.n_cells else ""
        return (f"{len(self.near_chance)} of {judged} {scope}task x regime cells are near chance: no model "
                "meaningfully beats the constant baseline.")

    def controls_line(self) -> str:
        """How many decided cells the controls hold in; ``undetermined`` when none could be decided."""
        seen = ", ".join(self.controls_seen) or "none"
        ran = {RENAMED_CONTROLS.get(c, c) for c in self.controls_seen}
        absent = [c for c in FEATURE_CONTROLS if c not in LEGACY_CONTROLS and c not in ran]
        missing = f"; not run: {', '.join(absent)}, so not required" if absent else ""
        if self.n_assessable == 0:
            return (f"Controls: no cell has both a PRV/MOMENT control and a PPG-specific model, so none is "
                    f"assessed (controls run: {seen}{missing}).")
        decided = self.n_assessable - len(self.undetermined_controls)
        if decided == 0:
            return (f"Controls: undetermined in all {self.n_assessable} assessable cells (a CI or paired test "
                    f"needs at least two seeds; controls run: {seen}{missing}).")
        scope = "decided " if decided < self.n_assessable else ""
        return (f"In {len(self.controls_hold)} of {decided} {scope}assessable cells, no PPG-specific model "
                f"meaningfully beats both the PRV and the MOMENT control (controls run: {seen}{missing}).")

    def lines(self) -> list[str]:
        """Give the findings as sentences (used in the HTML page and printed by the command)."""
        out = [self.chance_line(), self.controls_line()]
        judged = self.n_cells - len(self.undetermined_chance) - len(self.no_baseline)
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
    def cells(frame: pd.DataFrame, status: str | tuple[str, ...]) -> list[tuple[str, str]]:
        wanted = (status,) if isinstance(status, str) else status
        part = frame[frame["status"].isin(wanted)]
        return list(zip(part["task"], part["regime"], strict=True))

    seen = {c for row in controls["controls"] for c in str(row).split(";") if c}
    assessable = controls[controls["status"].isin(("beaten", "not_beaten", "undetermined"))]
    return Headline(
        n_cells=len(chance), near_chance=cells(chance, "near_chance"),
        undetermined_chance=cells(chance, "undetermined"), n_assessable=len(assessable),
        controls_hold=cells(controls, "not_beaten"),
        not_assessable=cells(controls, ("no_controls", "no_ppg_model")),
        rule_text=rule.text,
        controls_seen=[c for c in FEATURE_CONTROLS if c in seen],
        no_baseline=cells(chance, "no_baseline"),
        undetermined_controls=cells(controls, "undetermined"),
    )


def append_section(findings_md: Path, title: str, lines: list[str]) -> None:
    """Add ``## title`` and ``lines`` as bullets to ``findings.md`` (nothing when there are no lines)."""
    from ppgbench_pl.atomic_io import write_text_atomic

    if not lines:
        return
    text = findings_md.read_text(encoding="utf-8").rstrip("\n")
    write_text_atomic(findings_md, text + f"\n\n## {title}\n\n" + "\n".join(f"- {x}" for x in lines) + "\n")
