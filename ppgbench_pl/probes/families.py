"""Probe families: a hyperparameter grid plus how to fit and predict every point of it.

A family's ``fit_grid`` returns one prediction per grid point for held-out rows; families that can
share work across the grid (ridge: one SVD for all alphas) do so there. ``fit_one`` refits a single
point on the whole training part.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.probes.linear import LOGISTIC_CS, RIDGE_ALPHAS, RidgeGrid, logistic_pipeline


class ProbeFamily(Protocol):
    """What :class:`~ppgbench_pl.probes.search.GroupGridSearch` needs from a family of models."""

    name: str

    def grid(self) -> list[dict[str, Any]]:
        """Hyperparameter points, in the order ties are broken."""
        ...

    def fit_grid(self, x: np.ndarray, y: np.ndarray, x_eval: np.ndarray, classes: np.ndarray | None,
                 seed: int) -> list[Predictions]:
        """Fit every grid point on (x, y) and predict ``x_eval``."""
        ...

    def fit_one(self, x: np.ndarray, y: np.ndarray, params: dict[str, Any], classes: np.ndarray | None,
                seed: int) -> Any:
        """Fit one grid point; returns a fitted model for :meth:`predict`."""
        ...

    def predict(self, model: Any, x: np.ndarray, classes: np.ndarray | None) -> Predictions:
        """Predict with a model from :meth:`fit_one`."""
        ...


def align_proba(proba: np.ndarray, model_classes: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Probability columns re-ordered to ``classes``; classes unseen in this fit get 0."""
    out = np.zeros((len(proba), len(classes)))
    index = {c: i for i, c in enumerate(classes.tolist())}
    for j, c in enumerate(np.asarray(model_classes).tolist()):
        out[:, index[c]] = proba[:, j]
    return out


class RidgeFamily:
    """Standardise + ridge over the alpha grid, all alphas from one factorisation."""

    name = "ridge"

    def __init__(self, alphas: tuple[float, ...] = RIDGE_ALPHAS) -> None:
        self.alphas = alphas

    def grid(self) -> list[dict[str, Any]]:  # noqa: D102
        return [{"alpha": a} for a in self.alphas]

    def fit_grid(self, x, y, x_eval, classes, seed):  # noqa: ANN001, ANN201, D102
        kind = "regression" if np.ndim(y) == 1 else "regression_cls"
        return [Predictions(kind, p) for p in RidgeGrid(self.alphas).fit(x, y).predict_all(x_eval)]

    def fit_one(self, x, y, params, classes, seed):  # noqa: ANN001, ANN201, D102
        return RidgeGrid(self.alphas, alpha=params["alpha"]).fit(x, y)

    def predict(self, model, x, classes):  # noqa: ANN001, ANN201, D102
        pred = model.predict(x)
        return Predictions("regression" if pred.ndim == 1 else "regression_cls", pred)


class LogisticFamily:
    """Standardise + L2 logistic regression (lbfgs, max_iter 1000) over the C grid, unweighted."""

    name = "logistic"

    def __init__(self, cs: tuple[float, ...] = LOGISTIC_CS) -> None:
        self.cs = cs

    def grid(self) -> list[dict[str, Any]]:  # noqa: D102
        return [{"C": c} for c in self.cs]

    def fit_grid(self, x, y, x_eval, classes, seed):  # noqa: ANN001, ANN201, D102
        return [self.predict(self.fit_one(x, y, p, classes, seed), x_eval, classes) for p in self.grid()]

    def fit_one(self, x, y, params, classes, seed):  # noqa: ANN001, ANN201, D102
        if len(np.unique(y)) < 2:
            return ("constant", np.unique(y)[0])
        return logistic_pipeline(params["C"], seed).fit(x, y)

    def predict(self, model, x, classes):  # noqa: ANN001, ANN201, D102
        if isinstance(model, tuple):  # a training part with one class predicts it with certainty
            proba = np.zeros((len(x), len(classes)))
            proba[:, list(classes).index(model[1])] = 1.0
            return Predictions("classification", proba, classes)
        proba = align_proba(model.predict_proba(x), model.classes_, classes)
        return Predictions("classification", proba, classes)
