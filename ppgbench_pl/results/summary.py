"""From job records to summary.csv: mean and Student-t 95% CI per model x task x regime (PROTOCOL.md 7.2).

Fold value = mean over that fold's repeats; seed value = mean of its folds; ``mean`` = mean of the seed
values. The CI unit is a deliberate choice (PROTOCOL.md section 10 item 1): ``"seed"`` (default,
published) uses the S seed means with S-1 degrees of freedom; ``"fold"`` uses all seed x fold values.
The constant baseline of every job is summarised as its own model, ``constant``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

BASELINE_MODEL = "constant"
SUMMARY_COLUMNS = [
    "model", "task", "regime", "metric", "mean", "ci95", "ci_low", "ci_high", "n_seeds", "n_folds", "ci_unit",
]


def student_t_ci(values: np.ndarray) -> float:
    """Half-width t_{0.975, n-1} * sd(ddof=1) / sqrt(n); NaN with fewer than two values."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float("nan")
    return float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))


def fold_rows(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per (model, task, regime, seed, fold) with the reported metric's fold value.

    Baseline rows are de-duplicated across models: every model's job on the same fold computes the
    same constant baseline.
    """
    rows = []
    for rec in records:
        if rec.get("status") != "ok":
            continue
        metric = rec["metric"]
        values = [r["metrics"].get(metric) for r in rec["results"]]
        values = [v for v in values if v is not None]
        key = {"task": rec["task"], "regime": rec["regime"], "seed": rec["seed"], "fold": rec["fold"], "metric": metric}
        if values:
            rows.append({"model": rec["model"], **key, "value": float(np.mean(values))})
        base = rec.get("baseline", {}).get(metric)
        if base is not None:
            rows.append({"model": BASELINE_MODEL, **key, "value": float(base)})
    frame = pd.DataFrame(rows, columns=["model", "task", "regime", "seed", "fold", "metric", "value"])
    return frame.drop_duplicates(subset=["model", "task", "regime", "seed", "fold"], keep="first")


def summarise(records: Iterable[dict[str, Any]], ci_unit: str = "seed") -> pd.DataFrame:
    """The summary table (see module docstring)."""
    if ci_unit not in ("seed", "fold"):
        raise ValueError("ci_unit must be 'seed' or 'fold'")
    folds = fold_rows(records)
    out = []
    for (model, task, regime, metric), part in folds.groupby(["model", "task", "regime", "metric"], sort=True):
        seed_means = part.groupby("seed")["value"].mean().to_numpy()
        units = seed_means if ci_unit == "seed" else part["value"].to_numpy()
        mean = float(seed_means.mean())
        half = student_t_ci(units)
        out.append({
            "model": model, "task": task, "regime": regime, "metric": metric, "mean": mean, "ci95": half,
            "ci_low": mean - half, "ci_high": mean + half, "n_seeds": len(seed_means), "n_folds": len(part),
            "ci_unit": ci_unit,
        })
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def write_summary(run_dir: Path, records: Iterable[dict[str, Any]], ci_unit: str = "seed") -> Path:
    """Write ``summary.csv`` atomically and return its path."""
    path = Path(run_dir) / "summary.csv"
    tmp = path.with_name(".summary.csv.tmp")
    summarise(records, ci_unit).to_csv(tmp, index=False)
    tmp.replace(path)
    return path
