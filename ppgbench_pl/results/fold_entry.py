"""One job record slimmed to what the summary and the report need (:class:`FoldEntry`), and their shared names."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ppgbench_pl.cards.overlap import record_overlap
from ppgbench_pl.results.inference import t_ppf
from ppgbench_pl.results.records import job_id


class MalformedRecord(ValueError):
    """A job record lacks a field the summary needs, or holds one of the wrong type."""


def student_t_ci(values: Any) -> float:
    """Half-width t_{0.975, n-1} * sd(ddof=1) / sqrt(n); NaN with fewer than two values."""
    arr = np.asarray(values, dtype=float)
    if len(arr) < 2:
        return float("nan")
    return float(t_ppf(0.975, len(arr) - 1) * arr.std(ddof=1) / math.sqrt(len(arr)))


def code_label(code_version: Any) -> str:
    """``<version>+<first 12 hex of the source hash>`` of a record's ``code_version`` ('' if unknown)."""
    if not isinstance(code_version, Mapping):
        return str(code_version) if code_version else ""
    version = str(code_version.get("ppgbench") or "?")
    sha = str(code_version.get("source_sha256") or "")
    return f"{version}+{sha[:12]}" if sha else version


def view_label(fs: float | None) -> str:
    """``64Hz``, ``62.5Hz``; ``unknown rate`` for records that do not say."""
    return "unknown rate" if fs is None else f"{fs:g}Hz"


@dataclass(frozen=True)
class FoldEntry:
    """What the summary needs of one ``ok`` job record (a few hundred bytes)."""

    job_id: str
    model: str
    task: str
    regime: str
    seed: int
    fold: int
    metric: str
    value: float | None  # mean over the repeats that have a finite reported metric (fold_entry needs one)
    baseline: float | None
    fs: float | None
    backend: str
    code_version: str
    budget: str = "published"  # the run's budget (benchmark/budget.py); records before budgets: published
    n_train: int | None = None  # subjects in the outer train split (Nadeau-Bengio ratio); None if unknown
    n_test: int | None = None  # subjects in the outer test split
    overlap: str = "none"  # direct/source/unknown/none: was the model pretrained on this dataset (cards/overlap.py)
    deviations: str = ""  # settings that differ from the published protocol, ;-joined (Regime.deviations)

    @property
    def group(self) -> tuple[str, str, str]:
        """The (task, regime, metric) group whose rows this entry changes."""
        return (self.task, self.regime, self.metric)


def _number(value: Any) -> float | None:
    """Return a finite float, or None (null, NaN and non-numbers do not count)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _count(groups: Any) -> int | None:
    """Number of subjects in a split (``train_groups`` / ``test_groups``), None when not recorded."""
    return len(groups) if isinstance(groups, list) and groups else None


def short_mean(values: list[float]) -> float:
    """``np.mean`` of a short list without NumPy's per-call cost (the same sequential sum below 8 values)."""
    return sum(values) / len(values) if len(values) < 8 else float(np.mean(values))


def fold_entry(record: Mapping[str, Any]) -> FoldEntry | None:
    """The summary's slim view of a record, None unless ``ok``; ``MalformedRecord`` names a missing field or value."""
    if not isinstance(record, Mapping):
        raise MalformedRecord("not a job record (a JSON object was expected)")
    if record.get("status") != "ok":
        return None
    for key in ("model", "task", "regime", "seed", "fold", "metric"):
        if record.get(key) is None:
            raise MalformedRecord(f"missing field '{key}'")
    results = record.get("results")
    if not isinstance(results, list) or not all(isinstance(r, Mapping) for r in results):
        raise MalformedRecord("field 'results' is not a list of repeats")
    metric = str(record["metric"])
    values = [v for r in results if (v := _number((r.get("metrics") or {}).get(metric))) is not None]
    if not values:  # an ok record without a number: the summary would drop the fold, so it must rerun
        raise MalformedRecord(f"no repeat has a finite value of its metric '{metric}'")
    baseline = record.get("baseline") or {}
    try:
        seed, fold = int(record["seed"]), int(record["fold"])
    except (TypeError, ValueError):
        raise MalformedRecord("fields 'seed' and 'fold' must be integers") from None
    jid = record.get("job_id") or job_id(str(record["model"]), str(record["task"]), str(record["regime"]), seed, fold)
    return FoldEntry(
        job_id=str(jid), model=str(record["model"]), task=str(record["task"]), regime=str(record["regime"]),
        seed=seed, fold=fold, metric=metric, value=short_mean(values),
        baseline=_number(baseline.get(metric)) if isinstance(baseline, Mapping) else None,
        fs=_number(record.get("fs")), backend=str(record.get("backend") or ""),
        code_version=code_label(record.get("code_version")), budget=str(record.get("budget") or "published"),
        n_train=_count(record.get("train_groups")), n_test=_count(record.get("test_groups")),
        overlap=record_overlap(record), deviations=record_deviations(record),
    )


def record_deviations(record: Mapping[str, Any]) -> str:
    """The record's ``deviations`` (records made before the field: its user callbacks), ``;``-joined."""
    listed = record.get("deviations")
    if not isinstance(listed, list):
        listed = [f"callback={c}" for c in record.get("callbacks") or []]
    return ";".join(str(d) for d in listed)  # not ",": a value may be a list (max_depth=[5, 10])


def entry_or_id(record: Mapping[str, Any]) -> FoldEntry | str:
    """Return the entry of an ``ok`` record, else the job id of the record ('' if it has none)."""
    entry = fold_entry(record)
    return entry if entry is not None else str(record.get("job_id") or "")


@lru_cache(maxsize=1024)
def task_facts(task: str) -> tuple[str, str, bool | None]:
    """(dataset, unit of the reported metric, higher is better) of a task name; ('', '', None) if unknown."""
    from ppgbench_pl.data.registry import get_task
    from ppgbench_pl.errors import ConfigError

    try:
        spec = get_task(task)
    except ConfigError:
        return "", "", None
    return spec.dataset, spec.unit if spec.kind == "regression" else "", spec.higher_is_better
