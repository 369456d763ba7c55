"""What a cell's W&B run holds: summary = its ``summary.csv`` row, history = one step per job, flat config, tags."""

from __future__ import annotations

import math
from typing import Any

from ppgbench_pl.results.fold_entry import code_label, record_deviations

#: The summary of a cell's W&B run: its aggregates, as summary.csv has them.
AGGREGATES = ("mean", "ci95", "ci_low", "ci_high", "n_seeds", "n_folds", "mdd", "baseline_mean")
#: Flat config keys every cell run carries (for W&B's filters and parallel coordinates).
DESCRIPTORS = ("dataset", "metric", "unit", "higher_is_better", "budget", "ci_unit", "backend", "code_version",
               "pretraining_overlap", "deviations")
#: Descriptors that are also tags, as ``key:value``, when they say something (W&B filters on tags fastest).
TAGGED = {"backend": (), "pretraining_overlap": ("none", "unknown"), "deviations": ("",)}
#: History keys (per job) kept out of the run summary.
PER_JOB = ("seed", "fold", "ok", "seconds", "test/*", "baseline/*", "params/*", "jobs", "optuna_trials")


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def aggregates(row: dict[str, Any] | None) -> dict[str, Any]:
    """The summary of a cell run: the finite aggregates of its summary row (counts as integers)."""
    if row is None:
        return {}
    out: dict[str, Any] = {}
    for key in AGGREGATES:
        value = _finite(row.get(key))
        if value is not None:
            out[key] = int(value) if key in ("n_seeds", "n_folds") else value
    return out


def descriptors(row: dict[str, Any] | None, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The flat config of a cell run (from its summary row, else its first record)."""
    first = records[0] if records else {}
    out: dict[str, Any] = {"metric": first.get("metric"), **record_labels(first)}
    for key in DESCRIPTORS:
        value = (row or {}).get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            out[key] = bool(value) if key == "higher_is_better" else value
    return out


def record_labels(record: dict[str, Any]) -> dict[str, Any]:
    """A record's labels as flat config: budget, the backend that ran, code version, overlap, deviations."""
    return {"budget": record.get("budget") or "published", "backend": record.get("backend"),
            "code_version": code_label(record.get("code_version")),
            "pretraining_overlap": record.get("pretraining_overlap"), "deviations": record_deviations(record)}


def run_labels(task: str, regime: str, config: dict[str, Any], baseline: bool = False) -> tuple[str, str, list[str]]:
    """(group, job_type, tags) of a cell run."""
    tags = [task, regime, *(str(config[k]) for k in ("dataset", "budget") if config.get(k))]
    tags += [f"{k}:{config[k]}"[:64] for k, plain in TAGGED.items() if config.get(k) and config[k] not in plain]
    return f"{task}/{regime}", regime, [*dict.fromkeys(tags), *(["baseline"] if baseline else [])]


def quiet_summary(run: Any) -> None:
    """Keep every per-job history key and table out of the run's summary."""
    for key in PER_JOB:
        run.define_metric(key, summary="none")


def baseline_history(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One history row per job of a cell: seed, fold and the constant baseline's value on that fold."""
    rows = []
    for rec in sorted(records, key=lambda r: (r.get("seed", 0), r.get("fold", 0))):
        metric = rec.get("metric", "value")
        value = _finite((rec.get("baseline") or {}).get(metric))
        if rec.get("status") == "ok" and value is not None:
            rows.append({"seed": rec.get("seed"), "fold": rec.get("fold"), f"test/{metric}": value})
    return rows
