"""Subject cluster bootstrap of a paired difference, from the pooled out-of-fold predictions (issue 19).

A draw resamples subjects (the same draw in every seed, which share them); the metric is computed per seed from
per-subject sufficient statistics and averaged. Percentile interval; p = (1 + k)/(B + 1) (docs/statistics.md).
The predictions: repeat 0 of each job, subject-level tasks aggregated as each job chose.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ppgbench_pl.report.load import RunSet

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


def _job_arrays(runs: RunSet, rec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(y_true, y_pred, subjects) of a job's first repeat, aggregated per subject on subject-level tasks."""
    results = rec.get("results") or [{}]
    name = results[0].get("predictions") or "predictions_repeat0.npz"
    try:  # the job folder's .npz, or the arrays an exported file carries (RunSet.prediction_arrays)
        z = runs.prediction_arrays(rec, str(name))
        y, subjects = np.asarray(z["y_true"]), np.asarray(z["subjects"]).astype(str)
        pred = np.asarray(z["y_prob"] if "y_prob" in z else z["y_pred"])
        classes = np.asarray(z["classes"]) if "classes" in z else None
    except (OSError, KeyError, ValueError):
        return None
    if rec.get("level") == "subject":
        from ppgbench_pl.metrics.aggregation import aggregate, first_per_group

        method = (results[0].get("params") or {}).get("aggregation") or "mean"
        names, pred = aggregate(subjects, pred.astype(float), str(method))
        y, subjects = first_per_group(subjects, y), names
    if classes is not None and pred.ndim == 2:
        pred = classes[np.argmax(pred, axis=1)]
    return y, pred, subjects


def _constant_mae_stats(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], trained: list[Any]
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-subject MAE statistics of a seed's constant baseline, its fold means rebuilt from the pooled labels.

    None when a fold lacks ``train_groups`` or the target has several outputs.
    """
    y_all, subj_all = (np.concatenate([p[i] for p in parts]) for i in (0, 2))
    if np.ndim(y_all) != 1:
        return None
    ys, preds, subjects = [], [], []
    for (y, _, subj), train in zip(parts, trained, strict=True):
        if not isinstance(train, list) or not train:
            return None
        mask = np.isin(subj_all, np.asarray(train).astype(str))
        if not mask.any():
            return None
        ys.append(y)
        preds.append(np.full(len(y), float(np.mean(y_all[mask].astype(float)))))
        subjects.append(subj)
    return subject_stats("regression", np.concatenate(ys), np.concatenate(preds), np.concatenate(subjects))


def seed_stats(runs: RunSet, records: Iterable[dict[str, Any]], kind: str, classes: list[Any] | None = None,
               baseline: bool = False) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Seed -> per-subject statistics of the seed's pooled out-of-fold predictions (the constant's: ``baseline``).

    A seed with a missing or unreadable file is left out; ``classes`` default to those of the labels.
    """
    pooled: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    trained: dict[int, list[Any]] = {}
    broken: set[int] = set()
    for rec in records:
        arrays = _job_arrays(runs, rec)
        if arrays is None:
            broken.add(int(rec["seed"]))
        else:
            pooled.setdefault(int(rec["seed"]), []).append(arrays)
            trained.setdefault(int(rec["seed"]), []).append(rec.get("train_groups"))
    if baseline and kind == "regression":
        rebuilt = {seed: _constant_mae_stats(parts, trained[seed]) for seed, parts in pooled.items()
                   if seed not in broken}
        return {seed: built for seed, built in rebuilt.items() if built is not None}
    if classes is None and kind != "regression" and pooled:
        classes = sorted(set(np.concatenate([p[0] for parts in pooled.values() for p in parts]).tolist()))
    out = {}
    for seed, parts in pooled.items():
        if seed in broken:
            continue
        y, pred, subj = (np.concatenate([p[i] for p in parts]) for i in range(3))
        names, stats = subject_stats(kind, y, pred, subj, classes or [])
        out[seed] = (names, constant_stats(stats) if baseline else stats)
    return out
