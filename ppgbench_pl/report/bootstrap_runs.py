"""Read the pooled out-of-fold predictions of a cell for :mod:`.bootstrap` (which runs on simulated arrays too).

Repeat 0 of each job is used; subject-level tasks are aggregated as each job chose, as in the recorded metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ppgbench_pl.report.bootstrap import constant_stats, subject_stats
from ppgbench_pl.report.load import RunSet


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
