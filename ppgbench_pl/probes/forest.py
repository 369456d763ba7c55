"""The random-forest probe family and grid (PROTOCOL.md 4.2): raw embeddings, unweighted classes, as published."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.probes.backends import forest_backend_for, make_forest
from ppgbench_pl.probes.families import align_proba

N_ESTIMATORS: tuple[int, ...] = (100,)
MAX_DEPTH: tuple[int, ...] = (5, 10, 20)
MIN_SAMPLES_SPLIT: tuple[int, ...] = (2,)
MIN_SAMPLES_LEAF: tuple[int, ...] = (1,)
MAX_FEATURES: tuple[str | int | float, ...] = ("sqrt",)
#: Grid keys, in the order :meth:`ForestFamily.grid` nests them (the last varies fastest).
GRID_KEYS = ("n_estimators", "max_depth", "min_samples_split", "min_samples_leaf", "max_features")


@dataclass
class FittedForest:
    """A fitted forest and its probability columns' labels; ``model`` None: one class, predicted with certainty."""

    model: Any
    classes: np.ndarray | None
    backend: str


class ForestFamily:
    """Random forest regression or classification over the protocol's grid, on a resolved backend."""

    name = "random_forest"

    def __init__(self, n_estimators: Sequence[int] = N_ESTIMATORS, max_depth: Sequence[int] = MAX_DEPTH,
                 min_samples_split: Sequence[int] = MIN_SAMPLES_SPLIT,
                 min_samples_leaf: Sequence[int] = MIN_SAMPLES_LEAF,
                 max_features: Sequence[str | int | float] = MAX_FEATURES, backend: str = "sklearn",
                 n_jobs: int = -1) -> None:
        self.values: dict[str, tuple[Any, ...]] = {
            "n_estimators": tuple(n_estimators), "max_depth": tuple(max_depth),
            "min_samples_split": tuple(min_samples_split), "min_samples_leaf": tuple(min_samples_leaf),
            "max_features": tuple(max_features),
        }
        empty = [k for k, v in self.values.items() if not v]
        if empty:
            raise ValueError(f"random-forest grid needs at least one value for {empty}")
        self.backend, self.n_jobs = backend, n_jobs

    def grid(self) -> list[dict[str, Any]]:
        """Every combination, nested in :data:`GRID_KEYS` order (ties keep the earliest)."""
        return [dict(zip(GRID_KEYS, combo, strict=True))
                for combo in itertools.product(*(self.values[k] for k in GRID_KEYS))]

    def fit_one(self, x: np.ndarray, y: np.ndarray, params: dict[str, Any], classes: np.ndarray | None,
                seed: int) -> FittedForest:
        """Fit one grid point with ``random_state=seed``."""
        kind = "classification" if classes is not None else "regression" if np.ndim(y) == 1 else "regression_cls"
        backend = forest_backend_for(kind, self.backend)
        if kind == "classification":
            present = np.unique(y)
            if len(present) < 2:
                return FittedForest(None, present, backend)
        model = make_forest(kind, params, seed, self.backend, self.n_jobs)
        if backend == "cuml":
            return _fit_cuml(model, x, y, kind)
        model.fit(x, y)
        return FittedForest(model, getattr(model, "classes_", None), backend)

    def predict(self, model: FittedForest, x: np.ndarray, classes: np.ndarray | None) -> Predictions:
        """Regression values, or probabilities aligned to ``classes`` (unseen classes get 0)."""
        if classes is None:
            values = model.model.predict(_features(x, model.backend))
            values = np.asarray(values, dtype=np.float64)
            return Predictions("regression" if values.ndim == 1 else "regression_cls", values)
        assert model.classes is not None
        if model.model is None:
            proba = np.ones((len(x), 1))
        else:
            proba = np.asarray(model.model.predict_proba(_features(x, model.backend)), dtype=np.float64)
        return Predictions("classification", align_proba(proba, model.classes, classes), classes)


def _features(x: np.ndarray, backend: str) -> np.ndarray:
    """CuML works in float32; scikit-learn takes the rows as given."""
    return np.ascontiguousarray(x, dtype=np.float32) if backend == "cuml" else x


def _fit_cuml(model: Any, x: np.ndarray, y: np.ndarray, kind: str) -> FittedForest:
    """CuML wants float32 rows and, for classes, int32 codes 0..K-1; the codes map back afterwards."""
    if kind == "classification":
        labels, codes = np.unique(y, return_inverse=True)
        model.fit(_features(x, "cuml"), codes.astype(np.int32))
        return FittedForest(model, labels, "cuml")
    model.fit(_features(x, "cuml"), np.asarray(y, dtype=np.float32))
    return FittedForest(model, None, "cuml")
