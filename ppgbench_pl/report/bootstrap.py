"""Subject cluster bootstrap of a paired difference, from the pooled out-of-fold predictions (issue 19).

A draw resamples subjects (the same draw in every seed, which share them); the metric is computed per seed from
per-subject sufficient statistics and averaged. Percentile interval; p = (1 + k)/(B + 1) (docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

SeedStats = Mapping[int, tuple[np.ndarray, np.ndarray]]  # seed -> (subject names, [N, k] statistics)


def subject_stats(kind: str, y_true: np.ndarray, y_pred: np.ndarray, subjects: np.ndarray,
                  classes: Sequence[Any] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Per-subject sufficient statistics, subjects sorted by name.

    Regression: (sum |error|, windows); else per class the correct windows, then the windows of that class.
    """
    names, index = np.unique(np.asarray(subjects).astype(str), return_inverse=True)
    if kind == "regression":
        cols = [np.abs(np.asarray(y_pred, float) - np.asarray(y_true, float)), np.ones(len(y_true))]
    else:
        hit = np.asarray(y_pred) == np.asarray(y_true)
        cols = [hit & (y_true == c) for c in classes] + [np.asarray(y_true) == c for c in classes]
    stats = np.stack([np.bincount(index, weights=np.asarray(c, float), minlength=len(names)) for c in cols], 1)
    return names, stats


def pooled_metric(weights: np.ndarray, stats: np.ndarray, kind: str) -> np.ndarray:
    """Metric of each row of subject ``weights`` ([B, N] multiplicities) on [N, k] statistics -> [B]."""
    totals = weights @ stats
    if kind == "regression":
        return totals[:, 0] / totals[:, 1]
    half = stats.shape[1] // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = totals[:, :half] / totals[:, half:]
    return np.nanmean(recall, axis=1)


def constant_stats(stats: np.ndarray) -> np.ndarray:
    """Statistics of a constant predictor of the first class (balanced accuracy 1/C on every draw)."""
    half = stats.shape[1] // 2
    out = np.zeros_like(stats)
    out[:, half:] = stats[:, half:]
    out[:, 0] = stats[:, half]
    return out


def cluster_bootstrap(a: SeedStats, b: SeedStats, kind: str, n_boot: int = 2000, seed: int = 0,
                      alpha: float = 0.05) -> dict[str, float]:
    """Paired subject cluster bootstrap of the mean over shared seeds of metric(a) - metric(b)."""
    seeds = sorted(set(a) & set(b))
    nan = {"diff": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan, "n_subjects": 0}
    if not seeds:
        return nan
    common = set(a[seeds[0]][0])
    for s in seeds:
        common &= set(a[s][0]) & set(b[s][0])
    names = np.array(sorted(common))
    if len(names) < 2:
        return nan
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(names), np.full(len(names), 1.0 / len(names)), size=n_boot).astype(float)
    weights = np.vstack([np.ones(len(names)), weights])
    total = np.zeros(n_boot + 1)
    for s in seeds:
        for side, sign in ((a, 1.0), (b, -1.0)):
            subj, stats = side[s]
            total += sign * pooled_metric(weights, stats[np.searchsorted(subj, names)], kind)
    draws = total / len(seeds)
    observed, boot = float(draws[0]), draws[1:]
    boot = boot[np.isfinite(boot)]
    far = np.abs(boot - observed) >= abs(observed)
    return {"diff": observed, "ci_low": float(np.quantile(boot, alpha / 2)),
            "ci_high": float(np.quantile(boot, 1 - alpha / 2)), "p": float((1 + far.sum()) / (len(boot) + 1)),
            "n_subjects": len(names)}
