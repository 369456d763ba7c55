"""The report's view of the scores: per-fold values and the summary (mean, Student-t CI) per cell.

Every number comes from :class:`ppgbench_pl.results.summary.SummaryBook`, the code of ``summary.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report.load import order_models, order_regimes, order_tasks
from ppgbench_pl.results.summary import SummaryBook


@dataclass(frozen=True)
class Score:
    """One model's result in one cell: mean and Student-t 95% CI half-width (NaN with one unit)."""

    model: str
    mean: float
    ci95: float
    n_seeds: int
    n_folds: int

    @property
    def half_width(self) -> float:
        """The CI half-width, with an unknown CI counted as zero (bolding needs a number)."""
        return 0.0 if math.isnan(self.ci95) else self.ci95


class Scores:
    """Fold values and summary rows of completed records, indexed for the report (CI over ``ci_unit``)."""

    def __init__(self, records: Iterable[dict[str, Any]], ci_unit: str = "seed") -> None:
        """Summarise the ``ok`` records once, with the same code as summary.csv."""
        records = [r for r in records if r.get("status") == "ok"]
        self.ci_unit = ci_unit
        book = SummaryBook.from_records(records, ci_unit)
        self.summary: pd.DataFrame = book.summary()
        self.folds: pd.DataFrame = book.fold_table()
        self.higher_is_better: dict[str, bool] = {r["task"]: r["kind"] != "regression" for r in records}
        self.metric: dict[str, str] = {r["task"]: r["metric"] for r in records}
        self._index = {
            (row.task, row.regime, row.model): Score(row.model, float(row.mean), float(row.ci95),
                                                     int(row.n_seeds), int(row.n_folds))
            for row in self.summary.itertuples()
        }
        self._baseline = {(row.task, row.regime, row.model): str(row.baseline)
                          for row in self.summary.itertuples()
                          if isinstance(row.baseline, str) and row.baseline and ";" not in row.baseline}
        self._folds_by_cell = {key: part for key, part in self.folds.groupby(["task", "regime"], sort=False)}

    @property
    def regimes(self) -> list[str]:
        """Regimes with at least one score, in protocol order."""
        return order_regimes(set(self.summary["regime"]))

    @property
    def models(self) -> list[str]:
        """Models with at least one score (the constant baseline included), controls last."""
        return order_models(set(self.summary["model"]))

    def tasks(self, regime: str | None = None) -> list[str]:
        """Tasks with a score (in ``regime`` if given), in registry order."""
        frame = self.summary if regime is None else self.summary[self.summary["regime"] == regime]
        return order_tasks(set(frame["task"]))

    def baseline_of(self, task: str, regime: str, model: str) -> str | None:
        """The baseline row a (non-baseline) model is compared with in a cell: its task view's."""
        return self._baseline.get((task, regime, model))

    def baselines(self, task: str, regime: str) -> list[str]:
        """List the baseline rows of a cell (one per task view), in column order."""
        return [s.model for s in self.cell(task, regime) if is_baseline(s.model)]

    def resolve(self, task: str, regime: str, model: str, other: str) -> str | None:
        """``other``, or ``model``'s own baseline when ``other`` is the placeholder ``constant``."""
        if other == BASELINE_MODEL and not is_baseline(model):
            return self.baseline_of(task, regime, model)
        return other

    def runs(self, task: str, regime: str, model: str) -> pd.DataFrame:
        """Return the fold rows behind one score (seed, fold, value, view, backend, code_version)."""
        part = self._folds_by_cell.get((task, regime), self.folds.iloc[:0])
        return part[part["model"] == model]

    def get(self, task: str, regime: str, model: str) -> Score | None:
        """Return a model's score in a cell, or None when that cell was not run (or not finished)."""
        return self._index.get((task, regime, model))

    def cell(self, task: str, regime: str) -> list[Score]:
        """Every model's score in a cell, in column order."""
        return [s for m in self.models if (s := self.get(task, regime, m)) is not None]

    def best(self, task: str, regime: str) -> Score | None:
        """Return the best mean in a cell (lowest MAE, highest BA); first in column order on ties."""
        scores = self.cell(task, regime)
        if not scores:
            return None
        sign = 1.0 if self.higher_is_better[task] else -1.0
        return max(scores, key=lambda s: sign * s.mean)

    def paired_values(self, task: str, regime: str, model_a: str, model_b: str) -> tuple[np.ndarray, np.ndarray]:
        """Values of two models on the same (seed, fold) pairs, averaged per seed when the CI unit is ``seed``."""
        part = self._folds_by_cell.get((task, regime), self.folds.iloc[:0])
        a = part[part["model"] == model_a].set_index(["seed", "fold"])["value"]
        b = part[part["model"] == model_b].set_index(["seed", "fold"])["value"]
        joined = pd.concat({"a": a, "b": b}, axis=1, join="inner")
        if self.ci_unit == "seed" and len(joined):
            joined = joined.groupby(level="seed").mean()
        return joined["a"].to_numpy(dtype=float), joined["b"].to_numpy(dtype=float)
