"""Exhaustive grid selection with inner group CV, subject aggregation included (PROTOCOL.md 3.2, 6).

:class:`GroupGridSearch` is a scikit-learn style estimator: ``fit(X, y, groups)`` scores every
(grid point x aggregation) pair on each inner group fold, keeps the best mean (first in grid order on
ties; folds with an undefined score are left out of the mean), refits the winner on the whole
training part, and ``predict`` returns window-level predictions.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.metrics.aggregation import aggregate, candidates, first_per_group
from ppgbench_pl.metrics.scores import Predictions, selection_score
from ppgbench_pl.probes.families import ProbeFamily


def subject_predictions(pred: Predictions, groups: np.ndarray, method: str) -> Predictions:
    """Aggregate window predictions to one per group (probabilities per class column)."""
    _, values = aggregate(groups, pred.values, method)
    return Predictions(pred.kind, values, pred.classes)


class GroupGridSearch:
    """Select a probe's hyperparameters (and aggregation) by inner group CV, then refit.

    Args:
        family: The probe family and its grid.
        kind: Task kind (``regression``, ``classification``, ``regression_cls``).
        level: ``window`` or ``subject``.
        seed: Outer seed: seeds the inner folds and the models.
        n_inner_folds: Inner folds (4 in the protocol).
        binary_metric: Selection metric for binary tasks (``auroc`` as published).
    """

    def __init__(self, family: ProbeFamily, kind: str, level: str, seed: int, n_inner_folds: int = 4,
                 binary_metric: str = "auroc") -> None:
        self.family, self.kind, self.level, self.seed = family, kind, level, seed
        self.n_inner_folds, self.binary_metric = n_inner_folds, binary_metric

    def _aggregations(self) -> tuple[str, ...]:
        return candidates(self.kind) if self.level == "subject" else ("none",)

    def _score(self, y: np.ndarray, groups: np.ndarray, pred: Predictions, aggregation: str) -> float:
        if aggregation != "none":
            pred = subject_predictions(pred, groups, aggregation)
            y = first_per_group(groups, y)
        return selection_score(self.kind, y, pred, self.binary_metric)

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> GroupGridSearch:  # noqa: N803
        """Inner-CV selection over grid x aggregation, then refit the winner on all of ``X``."""
        groups = np.asarray(groups)
        self.classes_ = np.unique(y) if self.kind == "classification" else None
        grid, aggs = self.family.grid(), self._aggregations()
        scores = np.full((len(grid), len(aggs), self.n_inner_folds), np.nan)
        splitter = InnerGroupSplit(self.seed, self.n_inner_folds)
        for f, (tr, va) in enumerate(splitter.split(X, y, groups)):
            preds = self.family.fit_grid(X[tr], y[tr], X[va], self.classes_, self.seed)
            for g, pred in enumerate(preds):
                for a, agg in enumerate(aggs):
                    scores[g, a, f] = self._score(y[va], groups[va], pred, agg)
        with warnings.catch_warnings():  # a candidate with no defined fold score has an all-NaN row
            warnings.simplefilter("ignore", RuntimeWarning)
            means = np.nanmean(scores, axis=2)
        means = np.where(np.isnan(means), -np.inf, means)
        best = int(np.argmax(means.ravel()))  # argmax keeps the first of equal scores: grid order
        g_best, a_best = divmod(best, len(aggs))
        self.cv_scores_ = [
            {"params": grid[g], "aggregation": aggs[a], "mean_score": _finite(means[g, a]),
             "fold_scores": [_finite(s) for s in scores[g, a]]}
            for g in range(len(grid)) for a in range(len(aggs))
        ]
        self.best_params_: dict[str, Any] = dict(grid[g_best])
        self.aggregation_ = aggs[a_best] if aggs[a_best] != "none" else None
        self.best_score_ = _finite(means[g_best, a_best])
        self.model_ = self.family.fit_one(X, y, self.best_params_, self.classes_, self.seed)
        return self

    def predict(self, X: np.ndarray) -> Predictions:  # noqa: N803
        """Window-level predictions of the refitted winner."""
        return self.family.predict(self.model_, X, self.classes_)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
