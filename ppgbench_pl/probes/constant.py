"""The constant baseline: what a model that ignores the signal scores (PROTOCOL.md 5.1)."""

from __future__ import annotations

import numpy as np

from ppgbench_pl.metrics.aggregation import first_per_group
from ppgbench_pl.metrics.scores import Predictions


def constant_predictions(kind: str, level: str, y_train: np.ndarray, groups_train: np.ndarray,
                         n_test: int, classes: np.ndarray | None = None) -> Predictions:
    """Training mean or majority class one-hot (ties: smallest label, as ``DummyClassifier``); per subject."""
    labels = first_per_group(groups_train, y_train) if level == "subject" else np.asarray(y_train)
    if kind != "classification":
        mean = labels.mean(axis=0)
        return Predictions(kind, np.repeat(np.reshape(mean, (1, -1)), n_test, axis=0).squeeze(-1)
                           if np.ndim(mean) == 0 else np.tile(mean, (n_test, 1)))
    classes = np.unique(y_train) if classes is None else classes
    values, counts = np.unique(labels, return_counts=True)
    majority = values[np.argmax(counts)]
    proba = np.zeros((n_test, len(classes)))
    proba[:, list(classes).index(majority)] = 1.0
    return Predictions(kind, proba, classes)
