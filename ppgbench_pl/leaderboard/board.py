"""What the leaderboard shows, computed with the report's own code from exported files and run folders.

Cell means and CIs (:class:`~ppgbench_pl.report.scores.Scores`), bolding, the near-chance verdict under the
published ``ci`` rule and the overlap flags are the report's. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report import findings, tables
from ppgbench_pl.report.compare import Rule
from ppgbench_pl.report.load import RunSet, is_control, load_runs, record_id
from ppgbench_pl.report.scores import Scores

RULE = Rule("ci")


@dataclass(frozen=True)
class Column:
    """One task of one regime's table: what its header says and what the filters match."""

    task: str
    dataset: str
    tier: str
    label: str  # ``MAE (bpm) ↓``
    higher_is_better: bool
    row_status: str  # near_chance, undetermined, above_chance, no_baseline


def role(model: str) -> str:
    """``baseline`` (a constant), ``control`` (PRV, MOMENT) or ``model``."""
    if is_baseline(model):
        return "baseline"
    return "control" if is_control(model) else "model"


def _column(scores: Scores, task: str, rows: Any) -> Column:
    from ppgbench_pl.data.registry import TASKS

    spec = TASKS.get(task)
    dataset, tier = (spec.dataset, spec.tier) if spec is not None else (task.split("-", 1)[0], "unknown")
    metric = str(rows.iloc[0]["metric"])
    return Column(task, dataset, tier, tables.metric_label(metric, task),
                  bool(scores.higher_is_better.get(task, metric != "mae")), str(rows.iloc[0]["row_status"]))


class Board:
    """Everything the page draws: the report's ``main_cells`` rows, the task columns, where each model comes from."""

    def __init__(self, inputs: Sequence[str | Path]) -> None:
        """Read the inputs (:func:`~ppgbench_pl.report.load.load_runs`) and compute the board."""
        from ppgbench_pl.results.provenance import input_label

        self.inputs = [Path(p) for p in inputs]
        self.runs: RunSet = load_runs(inputs)
        self.labels = {p.resolve(): input_label(p) for p in self.inputs}  # file name and digest, never a path
        scores = Scores(self.runs.records, "seed")
        self.regimes, self.models = scores.regimes, scores.models
        self.cells = tables.main_cells(scores, RULE, findings.chance_cells(scores, RULE))
        self.columns: dict[str, list[Column]] = {}  # regime -> its task columns, in registry order
        for regime in self.regimes:
            part = self.cells[self.cells["regime"] == regime]
            self.columns[regime] = [_column(scores, t, part[part["task"] == t]) for t in scores.tasks(regime)
                                    if (part["task"] == t).any()]
        self.index = {(r.regime, r.task, r.model): r for r in self.cells.itertuples()}
        self.via: dict[tuple[str, str], list[str]] = {}  # (model, task) -> the sources an overlap flag rests on
        self.sources: dict[str, list[Path]] = {}  # model -> the inputs its scores come from
        for rec in self.runs.records:
            model = str(rec.get("model", ""))
            if rec.get("pretraining_overlap_via"):
                self.via.setdefault((model, str(rec.get("task", ""))), [str(v) for v in rec["pretraining_overlap_via"]])
            where = self.runs.sources[record_id(rec)]
            where = where if where.is_file() else where.parent.parent  # the exported file, or the run folder
            if where not in self.sources.setdefault(model, []):
                self.sources[model].append(where)

    def label(self, path: Path) -> str:
        """How the page names an input: its file name and content digest."""
        from ppgbench_pl.results.provenance import input_label

        return self.labels.get(path.resolve()) or input_label(path)
