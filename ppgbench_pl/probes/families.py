"""Probe families: a hyperparameter grid and how to fit and predict every point of it (``cv_fit``: shared work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.probes.linear import LOGISTIC_CS, RIDGE_ALPHAS, SingleClassError
from ppgbench_pl.probes.ridge import RidgeCV


class ProbeFamily(Protocol):
    """What :class:`~ppgbench_pl.probes.search.GroupGridSearch` needs from a family of models."""

    name: str

    def grid(self) -> list[dict[str, Any]]:
        """Hyperparameter points, in the order ties are broken."""
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
    """Standardise + ridge over the alpha grid: every alpha and inner fold from one Gram matrix."""

    name = "ridge"

    def __init__(self, alphas: tuple[float, ...] = RIDGE_ALPHAS, device: str | None = None) -> None:
        self.alphas, self.device = alphas, device

    def grid(self) -> list[dict[str, Any]]:  # noqa: D102
        return [{"alpha": a} for a in self.alphas]

    def cv_fit(self, x: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]],
               classes: np.ndarray | None, seed: int) -> tuple[list[list[Predictions]], Callable[[int], Any]]:
        """Validation predictions [fold][alpha] and a refit of any alpha on all rows."""
        kind = "regression" if np.ndim(y) == 1 else "regression_cls"
        cv = RidgeCV(self.alphas, self.device).fit(x, y, folds)
        preds = [[Predictions(kind, p) for p in fold] for fold in cv.cv_predictions_]
        return preds, lambda g: cv.refit(self.alphas[g])

    def fit_one(self, x, y, params, classes, seed):  # noqa: ANN001, ANN201, D102
        return RidgeCV((params["alpha"],), self.device).fit(x, y, []).refit(params["alpha"])

    def predict(self, model, x, classes):  # noqa: ANN001, ANN201, D102
        pred = model.predict(x)
        return Predictions("regression" if pred.ndim == 1 else "regression_cls", pred)


class LogisticFamily:
    """The published ``StandardScaler -> LogisticRegression(L2, lbfgs, max_iter 1000)``, one fit per C and fold."""

    name = "logistic"

    def __init__(self, cs: tuple[float, ...] = LOGISTIC_CS, single_class: str = "error") -> None:
        self.cs, self.single_class = cs, single_class

    def grid(self) -> list[dict[str, Any]]:  # noqa: D102
        return [{"C": c} for c in self.cs]

    def fit_one(self, x, y, params, classes, seed):  # noqa: ANN001, ANN201, D102
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        present = np.unique(y)
        if len(present) < 2:
            if self.single_class == "constant":
                return ("constant", present[0])
            label = present[0].item()
            raise SingleClassError(f"inner training part of {len(y)} windows has a single class ({label!r}); "
                                   "logistic regression needs two, as in scikit-learn (single_class: constant "
                                   "predicts it instead)")
        model = make_pipeline(StandardScaler(), LogisticRegression(C=params["C"], solver="lbfgs", max_iter=1000,
                                                                   random_state=seed))
        return model.fit(x, y)

    def predict(self, model, x, classes):  # noqa: ANN001, ANN201, D102
        if isinstance(model, tuple):  # a training part with one class predicts it with certainty
            proba = align_proba(np.ones((len(x), 1)), np.asarray([model[1]]), classes)
        else:
            proba = align_proba(model.predict_proba(x), model[-1].classes_, classes)
        return Predictions("classification", proba, classes)
