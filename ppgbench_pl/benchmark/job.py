"""Run jobs under their locks, each outcome or failure a record: done at most once, rerun until ``ok``."""

from __future__ import annotations

import math
import shutil
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack, suppress
from functools import partial
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from ppgbench_pl.benchmark.console import NOTICES
from ppgbench_pl.benchmark.identity import code_version
from ppgbench_pl.cards.overlap import record_fields as overlap_fields
from ppgbench_pl.encoders.prv import FeatureEncoder
from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.locks import LockBusy, LockTimeout, file_lock
from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.probes.constant import constant_predictions
from ppgbench_pl.regimes.base import JobContext, Regime, RepeatOutcome
from ppgbench_pl.results.folder_sync import read_record_complete
from ppgbench_pl.results.records import RESULTS_FILE, job_dir, read_record_file, working_dirs, write_job


def baseline_metrics(ctx: JobContext) -> dict[str, Any]:
    """The constant baseline of this fold, from training labels only (PROTOCOL.md 5.1)."""
    view = ctx.view
    train, test = ctx.outer()
    classes = np.unique(view.y[train]) if ctx.task.kind == "classification" else None
    pred = constant_predictions(ctx.task.kind, ctx.task.level, view.y[train], view.groups[train], len(test), classes)
    return evaluate(ctx.task.kind, ctx.task.level, view.y[test], view.groups[test], pred,
                    "mean" if ctx.task.level == "subject" else None)


Predictions = dict[str, dict[str, np.ndarray]]


def run_job(ctx: JobContext, regime: Regime) -> tuple[dict[str, Any], Predictions]:
    """Seed, run the regime, score the baseline; a failure (a non-finite metric too) is a ``failed`` record."""
    return run_jobs([ctx], regime)[0]


def run_jobs(ctxs: list[JobContext], regime: Regime) -> list[tuple[dict[str, Any], Predictions]]:
    """:func:`run_job` for jobs of one cell trained in one stack: each its own record and share of the time."""
    start, cpu_start = time.perf_counter(), time.process_time()
    records = [_record_head(ctx, regime) for ctx in ctxs]
    predictions: list[Predictions] = [{} for _ in ctxs]
    L.seed_everything(ctxs[0].seed, workers=True, verbose=False)  # and deterministic kernels (PROTOCOL.md 3.4)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for pattern in FRAMEWORK_NOTICES:
            warnings.filterwarnings("ignore", message=pattern)
        live = []
        for i, ctx in enumerate(ctxs):
            try:
                _prelude(ctx, records[i])
                live.append(i)
            except Exception as exc:  # noqa: BLE001 - isolation: any failure is recorded and the plan goes on
                _fail(records[i], exc)
        results = regime.run_group([ctxs[i] for i in live]) if live else []
        for i, result in zip(live, results, strict=True):
            records[i]["backend"] = regime.backend_for(ctxs[i].task.kind)  # a regime may learn it only once it ran
            try:
                if isinstance(result, Exception):
                    raise result
                predictions[i] = _results(ctxs[i], records[i], result)
            except Exception as exc:  # noqa: BLE001 - isolation, as above
                _fail(records[i], exc)
    share = 1 / len(ctxs)
    for record in records:
        record["warnings"] = dict(Counter(_warning_key(w) for w in caught))
        record["seconds"] = round((time.perf_counter() - start) * share, 3)
        record["cpu_seconds"] = round((time.process_time() - cpu_start) * share, 3)  # this process, all threads
        if len(ctxs) > 1:
            record["stack_group"] = [ctx.job_id for ctx in ctxs]
    return [(r, p if r["status"] == "ok" else {}) for r, p in zip(records, predictions, strict=True)]


#: Lightning's notices about what the engine does on purpose (some come once per process: not counted).
FRAMEWORK_NOTICES = (*NOTICES, r".*max_epochs=.* reached.*", r".*srun.* command is available.*")


def _record_head(ctx: JobContext, regime: Regime) -> dict[str, Any]:
    """What a record says before the job runs."""
    callbacks = [f"{type(c).__module__}.{type(c).__qualname__}" for c in ctx.callbacks] if regime.trains_trials else []
    return {
        "job_id": ctx.job_id, "model": ctx.model_name, "task": ctx.task.name, "regime": regime.name,
        "seed": ctx.seed, "fold": ctx.fold, "metric": ctx.task.metric, "kind": ctx.task.kind,
        "level": ctx.task.level, "fs": ctx.fs, "backend": regime.backend_for(ctx.task.kind),
        "code_version": code_version(),
        "callbacks": callbacks,
        # what differs from the published protocol (regime, encoder switches, callbacks): every table shows it
        "deviations": [*regime.deviations(), *ctx.encoder.deviations(), *(f"callback={c}" for c in callbacks)],
        **overlap_fields(ctx.encoder, ctx.task.name),  # was it pretrained on this dataset? (cards/overlap.py)
    }


def _prelude(ctx: JobContext, record: dict[str, Any]) -> None:
    """The outer split's subjects and the constant baseline of the fold (training labels only)."""
    view = ctx.view
    train, test = ctx.outer()
    record["train_groups"] = list(dict.fromkeys(view.groups[train].tolist()))
    record["test_groups"] = list(dict.fromkeys(view.groups[test].tolist()))
    if isinstance(ctx.encoder, FeatureEncoder) and ctx.embeddings is not None:
        # PRV windows without beats are zero-filled as published (PROTOCOL.md 5.2): say how many this fold has
        used = ctx.features(np.concatenate([train, test]))
        record["windows_without_features"] = {"n": int((~used.any(axis=1)).sum()), "of": len(used)}
    try:
        record["baseline"] = baseline_metrics(ctx)
    except PPGBenchError as exc:  # e.g. a test fold of one class: say which job
        raise type(exc)(f"{ctx.task.name} seed {ctx.seed} fold {ctx.fold}: constant baseline: {exc}") from exc


def _results(ctx: JobContext, record: dict[str, Any], outcomes: list[RepeatOutcome]) -> Predictions:
    """Each repeat's metrics (checked finite) into the record, search seeds above 0 in ``search_seed_results``."""
    predictions: Predictions = {}
    record["results"] = []
    for outcome in sorted(outcomes, key=lambda o: bool(o.details.get("search_seed"))):  # the published ones first
        searched = outcome.details.get("search_seed")
        r = int(outcome.details["repeat"]) if searched else len(record["results"])
        value = outcome.metrics.get(ctx.task.metric)  # missing or non-finite: the job fails, never ``ok``
        if value is None or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise ValueError(f"repeat {r}: metric {ctx.task.metric} is {'missing' if value is None else value!r}; "
                             "the job's predictions or labels are not usable (non-finite data?)")
        filename = f"predictions_repeat{r}{f'_search{int(searched)}' if searched else ''}.npz"
        predictions[filename] = outcome.predictions
        (record.setdefault("search_seed_results", []) if searched else record["results"]).append(
            {"repeat": r, "metrics": outcome.metrics, "params": outcome.params, "predictions": filename,
             **outcome.details})
    if not record["results"]:
        raise RuntimeError("the regime returned no result")
    record["status"] = "ok"
    return predictions


def _fail(record: dict[str, Any], exc: BaseException) -> None:
    record["status"] = "failed"
    record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    record["traceback"] = "".join(traceback.format_exception(exc, limit=8))
    record.pop("results", None)


def _warning_key(warning: warnings.WarningMessage) -> str:
    text = str(warning.message).splitlines()[0] if str(warning.message) else ""
    return f"{warning.category.__name__}: {text[:160]}"


def job_lock_path(run_dir: str | Path, jid: str) -> Path:
    """Lock file of one job (kept outside ``jobs/`` so record listings never see it)."""
    return Path(run_dir) / ".locks" / "jobs" / f"{jid}.lock"


def read_record(run_dir: str | Path, jid: str) -> dict[str, Any] | None:
    """The job's complete record, or ``None`` when there is none (or it cannot be read)."""
    with suppress(ValueError):
        return read_record_file(job_dir(Path(run_dir), jid) / RESULTS_FILE)
    return None


def execute_job(run_dir: str | Path, jid: str, make_context: Callable[[], JobContext], regime: Regime,
                extra: dict[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """(record, ran): one job run under its lock, its record written, or (another process's record, False)."""
    with ExitStack() as held:
        try:
            held.enter_context(file_lock(job_lock_path(run_dir, jid)))
        except LockTimeout as exc:  # --lock_timeout: this job fails here, unrecorded (its holder may finish it)
            return {"job_id": jid, "regime": regime.name, "status": "failed", "error": str(exc)}, True
        return _run_held(run_dir, [jid], lambda _: make_context(), regime, {jid: extra or {}})[jid]


def execute_group(run_dir: str | Path, jids: list[str], make_context: Callable[[str], JobContext],
                  regime: Regime, extras: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], bool]]:
    """:func:`execute_job` for jobs of one cell trained together; per job id, in order: (record, ran).

    Locks are taken without waiting; a job another process holds is waited for alone afterwards (no deadlock).
    """
    with ExitStack() as locks:
        mine = []
        for jid in sorted(jids):
            with suppress(LockBusy):
                locks.enter_context(file_lock(job_lock_path(run_dir, jid), blocking=False))
                mine.append(jid)
        results = _run_held(run_dir, mine, make_context, regime, extras)
    for jid in jids:
        if jid not in results:  # another process held it: wait for it, then it is usually done
            results[jid] = execute_job(run_dir, jid, partial(make_context, jid), regime, extras.get(jid))
    return [results[jid] for jid in jids]


def _run_held(run_dir: str | Path, jids: list[str], make_context: Callable[[str], JobContext], regime: Regime,
              extras: dict[str, dict[str, Any]]) -> dict[str, tuple[dict[str, Any], bool]]:
    """Jobs whose locks this process holds: the complete records found, or each run and its record written."""
    results: dict[str, tuple[dict[str, Any], bool]] = {}
    contexts = {}
    for jid in jids:
        existing = read_record_complete(run_dir, jid)  # ok, with every prediction file readable
        if existing is not None:
            results[jid] = (existing, False)
            continue
        try:
            contexts[jid] = make_context(jid)
        except Exception as exc:  # noqa: BLE001 - a job whose inputs cannot be built fails alone
            record: dict[str, Any] = {"job_id": jid, "regime": regime.name}
            _fail(record, exc)
            results[jid] = (_write(run_dir, jid, {**record, **extras.get(jid, {})}, {}), True)
    if contexts:
        for jid, (record, predictions) in zip(contexts, run_jobs(list(contexts.values()), regime), strict=True):
            results[jid] = (_write(run_dir, jid, {**record, **extras.get(jid, {})}, predictions), True)
    return results


def _write(run_dir: str | Path, jid: str, record: dict[str, Any], predictions: Predictions) -> dict[str, Any]:
    write_job(Path(run_dir), jid, record, predictions)
    return record


def discard_unfinished(run_dir: str | Path, jids: Iterable[str]) -> list[str]:
    """Remove (and name) the half-written ``.working`` folders an interrupt left for these jobs (lock free only)."""
    left = working_dirs(Path(run_dir))
    removed = []
    for jid in [j for j in jids if j in left]:
        with suppress(LockBusy), file_lock(job_lock_path(run_dir, jid), blocking=False):
            shutil.rmtree(left[jid], ignore_errors=True)
            removed.append(jid)
    return removed

