"""Subject-level aggregation of window predictions (PROTOCOL.md section 6)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

AGGREGATIONS = ("mean", "median", "topk_mean")
TOPK_FRACTION = 0.1


def candidates(kind: str) -> tuple[str, ...]:
    """Aggregation candidates selected as a hyperparameter, by task kind."""
    return {"regression": ("mean",), "classification": AGGREGATIONS, "regression_cls": ("mean", "median")}[kind]


def _topk_mean(scores: np.ndarray) -> np.ndarray:
    """Per column: mean of the k = max(1, ceil(0.1 n)) largest or smallest scores, the more extreme (ties: largest)."""
    k = max(1, math.ceil(TOPK_FRACTION * len(scores)))
    ordered = np.sort(scores, axis=0)
    low, high = ordered[:k].mean(axis=0), ordered[-k:].mean(axis=0)
    return np.where(1.0 - high <= low, high, low)


_REDUCERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda s: s.mean(axis=0),
    "median": lambda s: np.median(s, axis=0),
    "topk_mean": _topk_mean,
}


def aggregate(groups: np.ndarray, values: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
    """Reduce ``values`` ([n] or [n, c]) per group; returns (group names in first-appearance order, [g, ...])."""
    if method not in _REDUCERS:
        raise ValueError(f"unknown aggregation '{method}'; choose from {', '.join(AGGREGATIONS)}")
    if method == "topk_mean" and (np.nanmin(values) < 0 or np.nanmax(values) > 1):
        raise ValueError("topk_mean aggregates probabilities and needs scores in [0, 1]")
    groups = np.asarray(groups)
    names = np.asarray(list(dict.fromkeys(groups.tolist())))
    return names, np.stack([_REDUCERS[method](values[groups == g]) for g in names])


def first_per_group(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One label per group (its first window's), in first-appearance order."""
    _, first = np.unique(np.asarray(groups), return_index=True)
    return values[np.sort(first)]
