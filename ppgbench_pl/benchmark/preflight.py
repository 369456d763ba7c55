"""Checks a run makes before it computes anything (the executor, the output folder, the inputs), one line each."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.benchmark.executors import Executor
from ppgbench_pl.benchmark.plan import Job
from ppgbench_pl.benchmark.suite import BenchmarkSuite
from ppgbench_pl.errors import ConfigError, DataError, NotEvaluable
from ppgbench_pl.lightning_trainer import normalise_precision, precision_refusal

#: Strategies whose launcher re-executes the command once per rank (they need a per-rank launcher).
SCRIPT_LAUNCHED = re.compile(r"^(ddp|fsdp|deepspeed)(?!.*(spawn|fork|notebook))")


def check_strategy(suite: BenchmarkSuite, executor: Executor) -> None:
    """Refuse a per-rank DDP strategy under an executor that cannot launch ranks (rank 1 would wait forever)."""
    strategy = str(suite.trainer_kwargs.get("strategy", "auto"))
    devices = suite.trainer_kwargs.get("devices", 1)
    several = (isinstance(devices, int) and devices > 1) or (isinstance(devices, list) and len(devices) > 1)
    many = several or devices in ("auto", -1, "-1")
    if (SCRIPT_LAUNCHED.match(strategy) and many or strategy == "auto" and several) \
            and not executor.launches_ranks:
        raise ConfigError(f"trainer.strategy '{strategy}' on several devices needs one process per rank: use "
                          "'ddp_spawn', or the submitit executor with parameters.tasks_per_node = devices")


def check_precision(suite: BenchmarkSuite) -> None:
    """Refuse up front ``16-mixed`` on an explicit CPU (Lightning runs bf16 there); ``auto``: the trainer checks."""
    precision = suite.trainer_kwargs.get("precision")
    if str(suite.trainer_kwargs.get("accelerator", "auto")) == "cpu" and precision is not None \
            and normalise_precision(precision) == "16-mixed":
        raise ConfigError(precision_refusal(precision, "bf16-mixed", "cpu"))


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """The config with passwords in database URLs masked (it is written to run.json and W&B)."""
    storage = config.get("optuna_storage")
    if isinstance(storage, str):
        config = {**config, "optuna_storage": re.sub(r"://([^:/@]+):[^@]+@", r"://\1:***@", storage)}
    return config


def check_output_dir(run_dir: Path) -> None:
    """The run folder must be writable or creatable: probed with a folder made in it (``/proc`` lies)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--output_dir {run_dir}: exists and is not a folder")
    parent = run_dir if run_dir.exists() else next((p for p in run_dir.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise ConfigError(f"--output_dir {run_dir}: {parent} is a file, not a folder")
    try:
        probe = tempfile.mkdtemp(prefix=".ppgbench-probe-", dir=parent)
        os.rmdir(probe)
    except OSError as exc:
        raise ConfigError(f"--output_dir {run_dir}: cannot be made ({exc.strerror or exc})") from None


def evaluable_plan(suite: BenchmarkSuite, plan: Sequence[Job], dry: bool = False) -> tuple[list[Job], dict[str, str]]:
    """(plan, task -> why skipped): every task view loaded now; one not evaluable refuses the run if named."""
    rates = suite.encoder_infos if dry else suite.encoders
    by_dataset: dict[str, set[float]] = {}
    for job in plan:
        by_dataset.setdefault(job.task.dataset, set()).add(float(rates[job.model].sampling_rate))
    skipped: dict[str, str] = {}
    for dataset, fs in by_dataset.items():
        dm = suite.datamodules[dataset]
        for rate in sorted(fs):
            for task in dm.task_specs:
                try:
                    if task.name not in skipped:
                        dm.task_view(rate, task)
                except NotEvaluable as exc:
                    if suite.selection.get(dataset) is not None:  # the user named this dataset's tasks
                        raise
                    skipped[task.name] = f"{exc} (at {rate:g} Hz)"
    kept = [job for job in plan if job.task.name not in skipped]
    if plan and not kept:
        raise ConfigError(f"no task of the plan can be evaluated: {describe_skipped(skipped)}")
    return kept, skipped


def describe_skipped(skipped: dict[str, str]) -> str:
    """One line naming each task skipped (tasks not named: it cannot be evaluated) and why."""
    return (f"skipped {len(skipped)} task(s) that cannot be evaluated (no tasks were named, so all of the "
            f"dataset's were tried): " + "; ".join(skipped.values()))


def _fold_problem(dm: Any, fs: float, task: Any, seed: int, fold: int) -> str | None:
    """Why an outer fold of a classification task cannot be evaluated (one class in a part), or None."""
    view = dm.task_view(fs, task)
    try:
        split = dm.outer_split(view, seed, fold)
    except DataError as exc:
        return str(exc)
    if task.kind != "classification":
        return None
    for part, rows in (("test", split.test), ("training", split.train)):
        classes = np.unique(view.y[rows])
        if len(classes) < 2:
            return (f"{task.name} seed {seed} fold {fold}: every {part} label is class {int(classes[0])}"
                    if len(classes) else f"{task.name} seed {seed} fold {fold}: no {part} label")
    return None


def degenerate_jobs(suite: BenchmarkSuite, plan: Sequence[Job], dry: bool = False) -> dict[str, str]:
    """Job id -> why its outer fold is not evaluable (a part with one class): recorded so, never trained."""
    rates = suite.encoder_infos if dry else suite.encoders
    seen: dict[tuple[str, float, str, int, int], str | None] = {}
    out = {}
    for job in plan:
        fs = float(rates[job.model].sampling_rate)
        key = (job.task.dataset, fs, job.task.name, job.seed, job.fold)
        if key not in seen:
            seen[key] = _fold_problem(suite.datamodules[job.task.dataset], fs, job.task, job.seed, job.fold)
        if seen[key] is not None:
            out[job.job_id] = str(seen[key])
    return out


def describe_degenerate(found: dict[str, str]) -> str:
    """One line listing the not-evaluable folds (task, seed, fold and why), each fold once."""
    reasons = list(dict.fromkeys(found.values()))
    shown = "; ".join(reasons[:6]) + (f"; ... and {len(reasons) - 6} more" if len(reasons) > 6 else "")
    return (f"not evaluable, recorded without training ({len(found)} jobs, one class in a fold's test or "
            f"training part): {shown}")


def record_not_evaluable(run_dir: Path, job: Job, fs: float, reason: str, budget: str = "published") -> bool:
    """Write the record (with the run's budget) of a job whose fold is not evaluable unless one is there; True if so."""
    from ppgbench_pl.benchmark.identity import code_version
    from ppgbench_pl.benchmark.job import job_lock_path, read_record
    from ppgbench_pl.locks import file_lock
    from ppgbench_pl.results.folder_sync import read_record_complete
    from ppgbench_pl.results.records import write_job

    with file_lock(job_lock_path(run_dir, job.job_id)):
        old = read_record(run_dir, job.job_id) or {}
        if old.get("status") == "not_evaluable" or read_record_complete(run_dir, job.job_id) is not None:
            return False
        task = job.task
        write_job(run_dir, job.job_id, {
            "job_id": job.job_id, "model": job.model_name, "task": task.name, "regime": job.regime.name,
            "seed": job.seed, "fold": job.fold, "metric": task.metric, "kind": task.kind, "level": task.level,
            "fs": fs, "status": "not_evaluable", "error": f"not evaluable: {reason}",
            "code_version": code_version(), "budget": budget})
    return True
