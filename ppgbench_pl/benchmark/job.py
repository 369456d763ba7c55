"""Run one job and turn its outcome (or its failure) into a record: per-job isolation lives here."""

from __future__ import annotations

import time
import traceback
from typing import Any

import lightning as L
import numpy as np

from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.probes.constant import constant_predictions
from ppgbench_pl.regimes.base import JobContext, Regime


def baseline_metrics(ctx: JobContext) -> dict[str, Any]:
    """The constant baseline of this fold, from training labels only (PROTOCOL.md 5.1)."""
    view = ctx.view()
    train, test = ctx.outer()
    classes = np.unique(view.y[train]) if ctx.task.kind == "classification" else None
    pred = constant_predictions(ctx.task.kind, ctx.task.level, view.y[train], view.groups[train], len(test), classes)
    return evaluate(ctx.task.kind, ctx.task.level, view.y[test], view.groups[test], pred,
                    "mean" if ctx.task.level == "subject" else None)


def run_job(ctx: JobContext, regime: Regime) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """Seed, run the regime, score the baseline; a failure becomes a ``failed`` record, not an exception."""
    start = time.perf_counter()
    record: dict[str, Any] = {
        "job_id": ctx.job_id, "model": ctx.model_name, "task": ctx.task.name, "regime": regime.name,
        "seed": ctx.seed, "fold": ctx.fold, "metric": ctx.task.metric, "kind": ctx.task.kind,
        "level": ctx.task.level, "backend": regime.backend(),
    }
    predictions: dict[str, dict[str, np.ndarray]] = {}
    L.seed_everything(ctx.seed, workers=True, verbose=False)
    try:
        view = ctx.view()
        train, test = ctx.outer()
        record["train_groups"] = list(dict.fromkeys(view.groups[train].tolist()))
        record["test_groups"] = list(dict.fromkeys(view.groups[test].tolist()))
        record["baseline"] = baseline_metrics(ctx)
        outcomes = regime.run(ctx)
        record["results"] = []
        for r, outcome in enumerate(outcomes):
            filename = f"predictions_repeat{r}.npz"
            predictions[filename] = outcome.predictions
            record["results"].append({"repeat": r, "metrics": outcome.metrics, "params": outcome.params,
                                      "predictions": filename, **outcome.details})
        record["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - isolation: any failure is recorded and the plan goes on
        record["status"] = "failed"
        record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        record["traceback"] = traceback.format_exc(limit=8)
        predictions = {}
    record["seconds"] = round(time.perf_counter() - start, 3)
    return record, predictions
