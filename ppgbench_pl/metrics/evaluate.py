"""Score a fold's predictions at the task's level: window-level, or subject-level after aggregation."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppgbench_pl.metrics.aggregation import aggregate, first_per_group
from ppgbench_pl.metrics.scores import Predictions, fold_metrics


def evaluate(kind: str, level: str, y_true: np.ndarray, groups: np.ndarray, pred: Predictions,
             aggregation: str | None) -> dict[str, Any]:
    """All stored metrics of PROTOCOL.md 7.1; subject-level tasks aggregate window scores per subject."""
    if level != "subject":
        return fold_metrics(kind, y_true, pred)
    method = aggregation or "mean"
    _, values = aggregate(groups, pred.values, method)
    subject_true = first_per_group(groups, y_true)
    out = fold_metrics(kind, subject_true, Predictions(pred.kind, values, pred.classes, subject_level=True))
    out.update({"n_subjects": len(subject_true), "n_windows": len(y_true), "aggregation": method})
    return out
