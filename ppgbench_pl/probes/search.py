"""Grid (x aggregation) selection by inner group CV (PROTOCOL.md 3.2, 6); ties: grid order; then a refit."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.metrics.aggregation import aggregate, candidates, first_per_group
from ppgbench_pl.metrics.scores import NotEvaluableError, Predictions, selection_score
from ppgbench_pl.probes.families import ProbeFamily
from ppgbench_pl.probes.linear import check_finite


def subject_predictions(pred: Predictions, groups: np.ndarray, method: str) -> Predictions:
    """Aggregate window predictions to one per group (probabilities per class column)."""
    _, values = aggregate(groups, pred.values, method)
    return Predictions(pred.kind, values, pred.classes, subject_level=True)


class GroupGridSearch:
    """Select a probe's hyperparameters (and aggregation) by inner group CV, then refit (``seed``: folds, models)."""

    def __init__(self, family: ProbeFamily, kind: str, level: str, seed: int, n_inner_folds: int = 4,
                 binary_metric: str = "auroc", what: str = "embeddings") -> None:
        self.family, self.kind, self.level, self.seed = family, kind, level, seed
        self.n_inner_folds, self.binary_metric, self.what = n_inner_folds, binary_metric, what

    def _score(self, y: np.ndarray, groups: np.ndarray, pred: Predictions, aggregation: str) -> float:
        if aggregation != "none":
            pred = subject_predictions(pred, groups, aggregation)
            y = first_per_group(groups, y)
        return selection_score(self.kind, y, pred, self.binary_metric)

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray,  # noqa: N803
            folds: list[tuple[np.ndarray, np.ndarray]] | None = None) -> GroupGridSearch:
        """Select over grid x aggregation, refit the winner on all of ``X`` (``DataError``: NaN/inf, one class)."""
        X = np.asarray(X, dtype=np.float64)  # noqa: N806
        check_finite(X, self.what)
        groups = np.asarray(groups)
        self.classes_ = np.unique(y) if self.kind == "classification" else None
        if self.classes_ is not None and len(self.classes_) < 2:
            only = self.classes_[0] if len(self.classes_) else "?"
            raise NotEvaluableError(f"every training label is class {only}; "
                                    "a classifier cannot be fitted or selected")
        if folds is None:
            folds = list(InnerGroupSplit(self.seed, self.n_inner_folds).split(X, y, groups))
        grid = self.family.grid()
        aggs = candidates(self.kind) if self.level == "subject" else ("none",)
        scores = np.full((len(grid), len(aggs), len(folds)), np.nan)
        cv_fit = getattr(self.family, "cv_fit", None)
        refit: Callable[[int], Any] | None = None
        if cv_fit is not None:
            fold_preds, refit = cv_fit(X, y, folds, self.classes_, self.seed)
        else:
            family, classes = self.family, self.classes_
            fold_preds = [[family.predict(family.fit_one(X[tr], y[tr], p, classes, self.seed), X[va], classes)
                           for p in grid] for tr, va in folds]
        for f, (_, va) in enumerate(folds):
            for g, pred in enumerate(fold_preds[f]):
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
        self.model_ = (refit(g_best) if refit is not None
                       else self.family.fit_one(X, y, self.best_params_, self.classes_, self.seed))
        return self

    def predict(self, X: np.ndarray) -> Predictions:  # noqa: N803
        """Window-level predictions of the refitted winner."""
        X = np.asarray(X, dtype=np.float64)  # noqa: N806
        check_finite(X, self.what)
        return self.family.predict(self.model_, X, self.classes_)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
