"""What the leaderboard shows, computed with the report's own code from exported files and run folders.

Cell means and CIs (:class:`~ppgbench_pl.report.scores.Scores`), bolding, the near-chance verdict under the
published ``ci`` rule and the overlap flags are the report's. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report import findings, tables
from ppgbench_pl.report.load import RunSet, is_control, load_runs, record_id
from ppgbench_pl.report.rules import Rule
from ppgbench_pl.report.scores import Scores

RULE = "ci"


@dataclass(frozen=True)
class Column:
    """One task of one regime's table: what its header says and what the filters match."""

    task: str
    dataset: str
    tier: str
    metric: str
    label: str  # ``MAE (bpm) ↓``
    higher_is_better: bool
    row_status: str  # near_chance, undetermined, above_chance, no_baseline


@dataclass
class Board:
    """Everything the page draws."""

    inputs: list[Path]
    regimes: list[str]
    columns: dict[str, list[Column]]  # regime -> its task columns, in registry order
    models: list[str]
    cells: pd.DataFrame  # the report's main_cells rows
    via: dict[tuple[str, str], list[str]]  # (model, task) -> the pretraining sources an overlap flag rests on
    sources: dict[str, list[Path]]  # model -> the inputs its scores come from
    runs: RunSet
    rule: Rule
    documents: dict[Path, dict[str, Any]] = field(default_factory=dict)
    usual_grids: dict[str, str] = field(default_factory=dict)
    labels: dict[Path, str] = field(default_factory=dict)  # input -> file name and digest, never a local path
    _index: dict[tuple[str, str, str], Any] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        """Index the cells once."""
        self._index = {(r.regime, r.task, r.model): r for r in self.cells.itertuples()}

    def cell(self, regime: str, task: str, model: str) -> Any:
        """The ``main_cells`` row of one score, or None when that cell was not run."""
        return self._index.get((regime, task, model))

    def label(self, path: Path) -> str:
        """How the page names an input: its file name and content digest."""
        from ppgbench_pl.results.provenance import input_label

        return self.labels.get(path.resolve()) or input_label(path)

    def shareable(self, text: str) -> str:
        """``text`` (a loader's line naming an input) with each input's path replaced by its label."""
        from ppgbench_pl.results.provenance import scrub

        return scrub(text, self.inputs, [self.label(p) for p in self.inputs])

    def models_of(self, regime: str) -> list[str]:
        """The models with at least one score in a regime, in board order."""
        present = set(self.cells.loc[self.cells["regime"] == regime, "model"])
        return [m for m in self.models if m in present]


def role(model: str) -> str:
    """``baseline`` (a constant), ``control`` (PRV, MOMENT) or ``model``."""
    if is_baseline(model):
        return "baseline"
    return "control" if is_control(model) else "model"


def _task_facts(task: str) -> tuple[str, str]:
    """(dataset, tier) of a task; a task no longer in the registry gets its name's prefix and ``unknown``."""
    from ppgbench_pl.data.registry import TASKS

    spec = TASKS.get(task)
    return (spec.dataset, spec.tier) if spec is not None else (task.split("-", 1)[0], "unknown")


def _columns(scores: Scores, cells: pd.DataFrame, regime: str) -> list[Column]:
    out = []
    part = cells[cells["regime"] == regime]
    for task in scores.tasks(regime):
        rows = part[part["task"] == task]
        if rows.empty:
            continue
        dataset, tier = _task_facts(task)
        metric = str(rows.iloc[0]["metric"])
        out.append(Column(task, dataset, tier, metric, tables.metric_label(metric, task),
                          bool(scores.higher_is_better.get(task, metric != "mae")),
                          str(rows.iloc[0]["row_status"])))
    return out


def _input_of(path: Path) -> Path:
    """The input a record came from: the exported file itself, or the run folder of a job folder."""
    return path if path.is_file() else path.parent.parent


def _provenance(runs: RunSet) -> tuple[dict[tuple[str, str], list[str]], dict[str, list[Path]]]:
    via: dict[tuple[str, str], list[str]] = {}
    sources: dict[str, list[Path]] = {}
    for rec in runs.records:
        model = str(rec.get("model", ""))
        if rec.get("pretraining_overlap_via"):
            via.setdefault((model, str(rec.get("task", ""))), [str(v) for v in rec["pretraining_overlap_via"]])
        where = _input_of(runs.sources[record_id(rec)])
        if where not in sources.setdefault(model, []):
            sources[model].append(where)
    return via, sources


def collect(inputs: Sequence[str | Path]) -> Board:
    """Read the inputs (:func:`~ppgbench_pl.report.load.load_runs`) and compute the board."""
    from ppgbench_pl.results.provenance import input_label

    runs = load_runs(inputs)
    labels = {Path(p).resolve(): input_label(p) for p in inputs}
    scores = Scores(runs.records, "seed")
    rule = Rule(RULE)
    chance = findings.chance_cells(scores, rule)
    cells = tables.main_cells(scores, rule, chance)
    via, sources = _provenance(runs)
    regimes = scores.regimes
    return Board(inputs=[Path(p) for p in inputs], regimes=regimes,
                 columns={r: _columns(scores, cells, r) for r in regimes}, models=scores.models, cells=cells,
                 via=via, sources=sources, runs=runs, rule=rule,
                 documents=runs.documents,  # each exported file as read (and validated) once by load_runs
                 usual_grids={r: tables.usual_grid(cells, r) for r in regimes}, labels=labels)
