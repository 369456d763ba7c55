"""Craft a seeds x folds run whose records and predictions agree, from simulated subjects (issue 19 tests).

Each seed partitions the same subjects into folds (subject-disjoint, as the protocol does); a model's
window predictions are the truth plus a per-subject error and window noise, so every fold value in a
record is the metric of that fold's stored predictions, and the pooled out-of-fold predictions of a seed
cover every subject once. The constant baseline is the train mean (regression) or the train majority
class (classification). Deterministic in ``rng_seed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ppgbench_pl.results.records import job_id, write_job
from tests.report.fabricate import record

WINDOWS = 4


def _balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    classes = np.unique(y)
    return float(np.mean([np.mean(pred[y == c] == c) for c in classes]))


def _subjects(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "regression":
        return rng.normal(60.0, 12.0, n)
    return np.arange(n) % 2


def _predict(kind: str, y: np.ndarray, skill: float, subject_err: np.ndarray,
             rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Window predictions: for regression truth + skill * (subject error + noise); else noisy class probs."""
    if kind == "regression":
        return {"y_pred": y + skill * (subject_err + rng.normal(0, 2.0, len(y)))}
    logit = (2 * y - 1) * skill + subject_err + rng.normal(0, 0.5, len(y))
    p1 = 1 / (1 + np.exp(-logit))
    return {"y_prob": np.stack([1 - p1, p1], axis=1), "y_pred": (p1 >= 0.5).astype(int),
            "classes": np.array([0, 1])}


def _score(kind: str, y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y))) if kind == "regression" else _balanced_accuracy(y, pred)


def _baseline(kind: str, y_train: np.ndarray, y_test: np.ndarray) -> float:
    if kind == "regression":
        return float(np.mean(np.abs(y_test - y_train.mean())))
    values, counts = np.unique(y_train, return_counts=True)
    return _balanced_accuracy(y_test, np.full(len(y_test), values[np.argmax(counts)]))


def write_grid_run(run_dir: Path, skills: Mapping[str, float],
                   tasks: Sequence[tuple[str, str]] = (("synthetic-hr", "regression"),
                                                       ("synthetic-activity", "classification")),
                   seeds: Sequence[int] = (42, 43, 44, 45, 46), folds: int = 5, n_subjects: int = 30,
                   regime: str = "linear", rng_seed: int = 0) -> None:
    """Write every (model, task, seed, fold) job of a simulated run with its predictions.

    ``skills`` maps model -> error scale (regression: smaller is better) or class separation
    (classification: larger is better).
    """
    rng = np.random.default_rng(rng_seed)
    for task, kind in tasks:
        y_subject = _subjects(n_subjects, kind, rng)
        err = {m: rng.normal(0, 3.0 if kind == "regression" else 0.8, n_subjects) for m in skills}
        for seed in seeds:
            order = np.random.default_rng(seed).permutation(n_subjects)
            parts = np.array_split(order, folds)
            for fold, test in enumerate(parts):
                train = np.setdiff1d(order, test)
                names = np.array([f"s{i:03d}" for i in np.repeat(test, WINDOWS)])
                y = np.repeat(y_subject[test], WINDOWS)
                base = _baseline(kind, np.repeat(y_subject[train], WINDOWS), y)
                for model, skill in skills.items():
                    arrays = _predict(kind, y, skill, np.repeat(err[model][test], WINDOWS), rng)
                    value = _score(kind, y, arrays["y_pred"])
                    rec = record(model, task, regime, seed, fold, value, base)
                    rec["train_groups"] = [f"s{i:03d}" for i in train]
                    rec["test_groups"] = sorted(set(names.tolist()))
                    write_job(run_dir, rec["job_id"], rec,
                              {"predictions_repeat0.npz": {"y_true": y, "subjects": names, **arrays}})
                    assert rec["job_id"] == job_id(model, task, regime, seed, fold)
