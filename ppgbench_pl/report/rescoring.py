"""Table 4: the same stored predictions scored at subject level (as recorded: mismatches counted) and per window.

Values are summarised like summary.csv (repeats -> fold, folds -> seed, mean over seeds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.report.load import RunSet, in_order, record_id

JOB_COLUMNS = ["regime", "task", "model", "metric", "seed", "fold", "repeat", "aggregation", "subject_level",
               "window_level", "recorded"]
RESCORE_COLUMNS = ["regime", "task", "model", "metric", "n_folds", "subject_level", "window_level",
                   "window_minus_subject", "n_mismatched"]
MISMATCH_TOLERANCE = 1e-9


def _load(runs: RunSet, rec: dict[str, Any], name: str, kind: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """Predictions, labels and subjects of one file; ``ValueError`` with a one-line reason if unusable."""
    from ppgbench_pl.metrics.scores import Predictions

    arrays = runs.prediction_arrays(rec, name)
    missing = [k for k in ("y_true", "subjects") if k not in arrays]
    missing += [] if "y_pred" in arrays or "y_prob" in arrays else ["y_pred"]
    if missing:
        raise ValueError(f"lacks array(s) {', '.join(missing)}")
    try:
        if "classes" in arrays:
            pred = Predictions(kind, np.asarray(arrays["y_prob"], float), np.asarray(arrays["classes"]))
        else:
            pred = Predictions(kind, np.asarray(arrays["y_pred"], float))
        return pred, np.asarray(arrays["y_true"]), np.asarray(arrays["subjects"])
    except KeyError as exc:
        raise ValueError(f"lacks array {exc}") from None


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def rescore_jobs(runs: RunSet) -> pd.DataFrame:
    """One row per (subject-level job, repeat): subject-level, window-level and recorded values (bad files noted)."""
    from ppgbench_pl.metrics.evaluate import evaluate

    rows = []
    for rec in runs.records:  # an export of format version 1 carries no predictions
        if rec.get("level") != "subject" or (runs.job_folder(rec).is_file() and record_id(rec) not in runs.packed):
            continue
        metric, kind = rec["metric"], rec["kind"]
        for r in rec["results"]:
            name = str(r.get("predictions") or f"predictions_repeat{r.get('repeat', 0)}.npz")
            path = runs.prediction_where(rec, name)
            try:
                pred, y_true, subjects = _load(runs, rec, name, kind)
                aggregation = r.get("params", {}).get("aggregation") or r["metrics"].get("aggregation") or "mean"
                subject = evaluate(kind, "subject", y_true, subjects, pred, aggregation).get(metric)
                window = evaluate(kind, "window", y_true, subjects, pred, None).get(metric)
            except FileNotFoundError:
                runs.prediction_problems.append(f"{path}: predictions file missing (left out of Table 4)")
                continue
            except (ValueError, TypeError, IndexError) as exc:
                runs.prediction_problems.append(f"{path}: {exc} (left out of Table 4)".replace("\n", " "))
                continue
            rows.append([rec["regime"], rec["task"], rec["model"], metric, rec["seed"], rec["fold"],
                         r.get("repeat", 0), aggregation, _num(subject), _num(window),
                         _num(r["metrics"].get(metric))])
    return pd.DataFrame(rows, columns=JOB_COLUMNS)


def rescoring_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, task, model): subject-level and window-level means and their difference."""
    rows = []
    for (regime, task, model), part in in_order(jobs).groupby(["regime", "task", "model"], sort=False):
        folds = part.groupby(["seed", "fold"])[["subject_level", "window_level"]].mean()
        seeds = folds.groupby(level="seed").mean()
        subject, window = float(seeds["subject_level"].mean()), float(seeds["window_level"].mean())
        mismatched = int((part["subject_level"] - part["recorded"]).abs().gt(MISMATCH_TOLERANCE).sum())
        rows.append([regime, task, model, part["metric"].iloc[0], len(folds), subject, window, window - subject,
                     mismatched])
    return pd.DataFrame(rows, columns=RESCORE_COLUMNS)
