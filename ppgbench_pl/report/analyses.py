"""The paper's analyses: aggregation frequency (Table 3), rescoring (Table 4), edge pressure (Table 6), size (7)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

from ppgbench_pl.metrics.aggregation import candidates
from ppgbench_pl.report.load import (
    ReportError,
    RunSet,
    in_order,
    order_models,
    parameter_counts,
    record_id,
)

EPOCH_KEYS = ("epoch", "selected_epoch", "best_epoch")
EPOCH_AXIS = "epoch (selected)"
SKIPPED_AXES = ("aggregation", "aggregation_idx")
EDGE_COLUMNS = ["regime", "axis", "n_selections", "at_low", "at_high", "frac_low", "frac_high", "low", "high"]


def aggregation_choices(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per selection (job x repeat) on a subject-level task with more than one candidate."""
    rows = []
    for rec in records:
        if rec.get("level") != "subject" or len(candidates(rec["kind"])) < 2:
            continue
        for r in rec["results"]:
            if chosen := (r.get("params", {}).get("aggregation") or r.get("metrics", {}).get("aggregation")):
                rows.append({"regime": rec["regime"], "model": rec["model"], "task": rec["task"],
                             "kind": rec["kind"], "aggregation": chosen})
    return pd.DataFrame(rows, columns=["regime", "model", "task", "kind", "aggregation"])


def aggregation_frequency(choices: pd.DataFrame) -> pd.DataFrame:
    """Count the selections and fractions per (regime, model), plus an ``all`` row per regime."""
    strategies = [s for s in ("mean", "median", "topk_mean") if s in set(choices["aggregation"])]
    strategies += sorted(set(choices["aggregation"]) - set(strategies))
    rows = []
    for regime, part in in_order(choices, ("regime",)).groupby("regime", sort=False):
        groups = [(m, part[part["model"] == m]) for m in order_models(set(part["model"]))] + [("all", part)]
        for model, sel in groups:
            counts = sel["aggregation"].value_counts()
            row: dict[str, Any] = {"regime": regime, "model": model, "n_selections": len(sel)}
            for s in strategies:
                row[s] = int(counts.get(s, 0))
                row[f"{s}_frac"] = row[s] / len(sel)
            rows.append(row)
    columns = ["regime", "model", "n_selections"] + [c for s in strategies for c in (s, f"{s}_frac")]
    return pd.DataFrame(rows, columns=columns)


def _numeric(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def search_space(result: dict[str, Any]) -> dict[str, set[float]]:
    """Values seen per axis in one repeat's search history; the selected epoch under :data:`EPOCH_AXIS`."""
    seen: dict[str, set[Any]] = {}
    points = [e.get("params", {}) for e in result.get("cv_scores") or []]
    # Optuna trials at the top of a result or one level down (``{"optuna": {"trials": [...]}}``)
    found = [*(result.get("trials") or []), *(t for v in result.values() if isinstance(v, dict)
                                              and isinstance(v.get("trials"), list) for t in v["trials"])]
    trials = [t for t in found if isinstance(t, dict)]
    points += [t.get("params", {}) for t in trials]
    for params in points:
        for axis, value in params.items():
            seen.setdefault(axis, set()).add(value)
    epochs: set[int] = set()
    for values in (t.get("intermediate_values", t.get("intermediate")) for t in trials):  # {epoch: v} or a list
        if isinstance(values, dict | list):
            epochs |= set(map(int, values)) if isinstance(values, dict) else set(range(len(values)))
    numeric = {a: {float(v) for v in vals} for a, vals in seen.items()
               if a not in SKIPPED_AXES and all(_numeric(v) for v in vals) and len(vals) >= 2}
    if len(epochs) >= 2:
        numeric[EPOCH_AXIS] = {float(e) for e in epochs}
    return numeric


def edge_choices(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per (selection, numeric axis): the chosen value and whether it sits at an edge."""
    rows = []
    for rec in records:
        for r in rec["results"]:
            params = r.get("params", {})
            chosen = {a: v for a, v in params.items() if a not in EPOCH_KEYS}
            if (epoch := next((params[k] for k in EPOCH_KEYS if k in params), None)) is not None:
                chosen[EPOCH_AXIS] = epoch
            for axis, values in search_space(r).items():
                value = chosen.get(axis)
                if not _numeric(value):
                    continue
                low, high = min(values), max(values)
                rows.append({"regime": rec["regime"], "model": rec["model"], "task": rec["task"], "axis": axis,
                             "value": float(value), "low": low, "high": high, "at_low": float(value) <= low,
                             "at_high": float(value) >= high})
    return pd.DataFrame(rows, columns=["regime", "model", "task", "axis", "value", "low", "high", "at_low", "at_high"])


def edge_pressure(choices: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, axis): selections, how many sit at the lowest / highest value, and the fractions."""
    rows = []
    for regime, part in in_order(choices, ("regime",)).groupby("regime", sort=False):
        for axis in sorted(set(part["axis"]), key=lambda a: (a == EPOCH_AXIS, a)):
            sel = part[part["axis"] == axis]
            n, lo, hi = len(sel), int(sel["at_low"].sum()), int(sel["at_high"].sum())
            rows.append({"regime": regime, "axis": axis, "n_selections": n, "at_low": lo, "at_high": hi,
                         "frac_low": lo / n, "frac_high": hi / n, "low": sel["low"].min(), "high": sel["high"].max()})
    return pd.DataFrame(rows, columns=EDGE_COLUMNS)


def read_parameter_file(path: Path) -> dict[str, dict[str, int]]:
    """Parameter counts from JSON ({model: n | {"total": n, "trainable": n}}) or CSV (model,total,trainable)."""
    if not path.exists():
        raise ReportError(f"{path}: no such parameter-count file")
    try:
        if path.suffix == ".json":
            return parameter_counts(json.loads(path.read_text()))
        frame = pd.read_csv(path)
        total = next((c for c in ("total", "parameters", "n_parameters") if c in frame.columns), None)
        if "model" in frame.columns and total is not None:
            out: dict[str, dict[str, int]] = {}
            for row in frame.to_dict("records"):
                out[str(row["model"])] = {"total": int(row[total])}
                if "trainable" in frame.columns and pd.notna(row["trainable"]):
                    out[str(row["model"])]["trainable"] = int(row["trainable"])
            return out
    except (ValueError, TypeError, AttributeError, KeyError, UnicodeDecodeError,
            pd.errors.ParserError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReportError(f"{path}: not a parameter-count file ({detail}); expected CSV "
                          "model,total[,trainable] or JSON {model: n}") from None
    raise ReportError(f"{path}: expected columns 'model' and 'total' (optionally 'trainable')")


def parameter_table(counts: dict[str, dict[str, int]], models: list[str]) -> pd.DataFrame:
    """Table 7: total and trainable parameters of the models in the report that have a count."""
    rows = [{"model": m, "total": counts[m].get("total"), "trainable": counts[m].get("trainable")}
            for m in models if m in counts]
    return pd.DataFrame(rows, columns=["model", "total", "trainable"])


JOB_COLUMNS = ["regime", "task", "model", "metric", "seed", "fold", "repeat", "aggregation", "subject_level",
               "window_level", "recorded"]
RESCORE_COLUMNS = ["regime", "task", "model", "metric", "n_folds", "subject_level", "window_level",
                   "window_minus_subject", "n_mismatched"]
MISMATCH_TOLERANCE = 1e-9


def _load(runs: RunSet, rec: dict[str, Any], name: str, kind: str) -> tuple[Any, np.ndarray, np.ndarray]:
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
            rows.append([rec["regime"], rec["task"], rec["model"], metric, rec["seed"], rec["fold"], r.get("repeat", 0),
                         aggregation, _num(subject), _num(window), _num(r["metrics"].get(metric))])
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
