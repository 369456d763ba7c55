"""Craft run folders with known outcomes by writing job records through the benchmark's own writer."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from ppgbench_pl.data.registry import TASKS
from ppgbench_pl.results.records import job_id, write_job

SEEDS = (1, 2, 3, 4, 5)


def spread(mean: float, half: float, n: int = len(SEEDS)) -> list[float]:
    """n values with exactly this mean and this Student-t 95% CI half-width."""
    base = np.arange(n) - (n - 1) / 2
    unit = stats.t.ppf(0.975, n - 1) * base.std(ddof=1) / math.sqrt(n)
    return list(mean + base * (half / unit))


def record(model: str, task: str, regime: str, seed: int, fold: int, value: float | None,
           baseline: float | None, params: dict[str, Any] | None = None, status: str = "ok",
           fs: float | None = None, code_version: dict[str, str] | None = None, backend: str = "sklearn",
           **details: Any) -> dict[str, Any]:
    """A results.json record shaped like benchmark/job.py writes it (``fs``, ``code_version`` if given)."""
    spec = TASKS[task]
    rec: dict[str, Any] = {
        "job_id": job_id(model, task, regime, seed, fold), "model": model, "task": task, "regime": regime,
        "seed": seed, "fold": fold, "metric": spec.metric, "kind": spec.kind, "level": spec.level,
        "backend": backend, "train_groups": ["a"], "test_groups": ["b"], "seconds": 0.1, "status": status,
    }
    if fs is not None:
        rec["fs"] = fs
    if code_version is not None:
        rec["code_version"] = code_version
    if status != "ok":
        rec["error"] = "RuntimeError: crafted failure"
        return rec
    rec["baseline"] = {spec.metric: baseline}
    metrics: dict[str, Any] = {spec.metric: value}
    chosen = dict(params or {})
    if spec.level == "subject":
        chosen.setdefault("aggregation", "mean")
        metrics["aggregation"] = chosen["aggregation"]
    rec["results"] = [{"repeat": 0, "metrics": metrics, "params": chosen,
                       "predictions": "predictions_repeat0.npz", **details}]
    return rec


def write_cell(run_dir: Path, model: str, task: str, regime: str, values: Sequence[float],
               baseline: Sequence[float], seeds: Sequence[int] = SEEDS, fold: int = 0, **fields: Any) -> None:
    """One model's jobs in one (task, regime) cell: one fold per seed, so the seed value is the job value.

    ``fields`` go to :func:`record` (``fs``, ``code_version``, ``backend``).
    """
    for seed, value, base in zip(seeds, values, baseline, strict=True):
        write_job(run_dir, job_id(model, task, regime, seed, fold),
                  record(model, task, regime, seed, fold, value, base, **fields))


def write_run_json(run_dir: Path, planned: Sequence[str], parameters: dict[str, Any] | None = None) -> None:
    """A minimal run.json with the planned job ids (and optional parameter counts)."""
    meta: dict[str, Any] = {"planned_jobs": list(planned)}
    if parameters is not None:
        meta["parameters"] = parameters
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(meta))


SHOWCASE_CHANCE = {"synthetic-hr": 12.0, "synthetic-activity": 0.34, "synthetic-stiffness": 0.5,
                   "synthetic-age": 15.0}
SHOWCASE_GAINS = {  # value = chance * gain (MAE) or chance / gain (BA): a lower gain is better
    "synthetic-hr": {"P": 0.6, "prv_neurokit2": 0.8, "moment_small": 0.9},
    "synthetic-activity": {"P": 0.8, "prv_neurokit2": 0.8, "moment_small": 0.9},  # the controls hold
    "synthetic-stiffness": {"P": 0.995, "prv_neurokit2": 1.0, "moment_small": 1.0},  # near chance
    "synthetic-age": {"P": 0.7, "prv_neurokit2": 0.9, "moment_small": 0.85},
}


def _search(regime: str, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Chosen params and search history: a grid for linear, Optuna trials for mlp."""
    if regime == "linear":
        grid = [{"params": {"alpha": a}, "mean_score": -1.0} for a in (0.1, 1.0, 10.0)]
        return {"alpha": [0.1, 1.0, 10.0][seed % 3]}, {"cv_scores": grid}
    trials = [{"number": n, "state": "COMPLETE", "value": 0.1, "params": {"lr": lr},
               "intermediate_values": {"0": 0.1, "1": 0.2, "2": 0.3}, "user_attrs": {}}
              for n, lr in enumerate((1e-4, 1e-3, 1e-2))]
    return {"lr": 1e-3, "epoch": seed % 3}, {"optuna": {"trials": trials}}


def write_showcase_run(run_dir: Path) -> None:
    """A small but complete run: two regimes, the controls, subject-level predictions, searches."""
    rng = np.random.default_rng(0)
    for regime, shift in (("linear", 0.0), ("mlp", 0.05)):
        for task, chance in SHOWCASE_CHANCE.items():
            spec = TASKS[task]
            base = spread(chance, 0.01 * chance)
            for model, gain in SHOWCASE_GAINS[task].items():
                for seed, b in zip(SEEDS, base, strict=True):
                    if spec.kind == "regression":
                        value = b * (gain - shift)
                    else:
                        value = min(0.99, b / (gain - shift / 10))
                    params, details = _search(regime, seed)
                    preds = None
                    if spec.level == "subject":
                        choice = ("mean", "median", "topk_mean")[seed % 3]
                        params["aggregation"] = "mean" if spec.kind == "regression" else choice
                        preds = {"predictions_repeat0.npz": _subject_predictions(spec.kind, rng)}
                    rec = record(model, task, regime, seed, 0, float(value), float(b), params, **details)
                    write_job(run_dir, rec["job_id"], rec, preds)


def _subject_predictions(kind: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    subjects = np.repeat(np.array(["s1", "s2", "s3", "s4"]), 3)
    if kind == "regression":
        y = np.repeat(np.array([30.0, 40.0, 50.0, 60.0]), 3)
        return {"y_true": y, "subjects": subjects, "y_pred": y + rng.normal(0, 5, len(y))}
    y = np.repeat(np.array([0, 1, 0, 1]), 3)
    p1 = np.clip(0.5 + (y - 0.5) * 0.4 + rng.normal(0, 0.2, len(y)), 0, 1)
    prob = np.stack([1 - p1, p1], axis=1)
    return {"y_true": y, "subjects": subjects, "y_prob": prob, "y_pred": (p1 >= 0.5).astype(int),
            "classes": np.array([0, 1])}
