"""``ppgbench benchmark``: plan, check the folder, compute embeddings once, fan jobs out, summarise.

Order of work:

1. Build the suite from the resolved config and its plan; check or extend ``run.json`` (a folder
   never mixes results of another config, data or code version).
2. Skip every job whose ``ok`` record exists (failed jobs run again).
3. Compute the embeddings the pending jobs need, once per (encoder, dataset, rate), here, before any
   worker starts, so workers only read the on-disk cache (a worker that finds an entry missing
   computes it under the cache lock, so it is still computed once).
4. Hand the pending jobs to the executor; as outcomes arrive, update ``status.json``, the summary
   (throttled, and always at the end) and W&B, and show progress.

A job lost by the infrastructure (a killed worker, a failed SLURM task) has no record, is listed as
failed for this invocation and runs again next time.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ppgbench_pl.benchmark.executors import Executor, LocalExecutor
from ppgbench_pl.benchmark.identity import (
    check_or_write_identity,
    device_string,
    package_versions,
    parameter_counts,
    run_identity,
)
from ppgbench_pl.benchmark.job import read_record
from ppgbench_pl.benchmark.plan import Job, describe_plan, progress_interval
from ppgbench_pl.benchmark.runner import RunReport
from ppgbench_pl.benchmark.suite import SUITE_KEYS, BenchmarkSuite, instantiate, suite_for
from ppgbench_pl.benchmark.tracking import CellTracker, wandb_enabled
from ppgbench_pl.benchmark.worker import JobOutcome, JobSpec, run_job_spec
from ppgbench_pl.data.processed import write_json_atomic
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import Regime
from ppgbench_pl.results.summary import write_summary

#: Strategies whose launcher re-executes the command once per rank (they need a per-rank launcher).
SCRIPT_LAUNCHED = re.compile(r"^(ddp|fsdp|deepspeed)(?!.*(spawn|fork|notebook))")


@dataclass
class RunOptions:
    """How and where to run (not part of the suite, so not sent to workers).

    Args:
        output_dir: Run folder.
        executor: Where jobs run.
        wandb: ``group``, ``per-job`` or ``off`` (see :mod:`ppgbench_pl.benchmark.tracking`).
        wandb_project: W&B project.
        ci_unit: ``seed`` (published) or ``fold``.
        progress: Progress bar on stderr.
        summary_every_s: Least seconds between summary rewrites while jobs finish.
    """

    output_dir: Path
    executor: Executor = field(default_factory=LocalExecutor)
    wandb: str = "group"
    wandb_project: str = "ppgbench"
    ci_unit: str = "seed"
    progress: bool = True
    summary_every_s: float = 10.0


def dry_run(config: dict[str, Any], output_dir: Path) -> str:
    """The plan table, built from the config alone (no data read, no encoder built)."""
    suite = BenchmarkSuite(config, output_dir)
    plan = suite.plan(dry=True)
    done = {j.job_id for j in plan if (r := read_record(output_dir, j.job_id)) and r.get("status") == "ok"}
    return describe_plan(plan, done)


def slim(record: dict[str, Any]) -> dict[str, Any]:
    """What the summary needs of a record (Optuna histories and the rest stay on disk, not in memory)."""
    metric = record.get("metric")
    out = {k: record.get(k) for k in ("job_id", "status", "model", "task", "regime", "seed", "fold", "metric")}
    out["results"] = [{"metrics": {metric: r.get("metrics", {}).get(metric)}} for r in record.get("results", [])]
    out["baseline"] = {metric: (record.get("baseline") or {}).get(metric)}
    return out


def check_strategy(suite: BenchmarkSuite, executor: Executor) -> None:
    """Refuse a per-rank DDP strategy under an executor that cannot launch ranks (it would re-run the command)."""
    strategy = str(suite.trainer_kwargs.get("strategy", "auto"))
    devices = suite.trainer_kwargs.get("devices", 1)
    many = (isinstance(devices, int) and devices > 1) or (isinstance(devices, list) and len(devices) > 1) \
        or devices in ("auto", -1, "-1")
    if SCRIPT_LAUNCHED.match(strategy) and many and not executor.launches_ranks:
        raise ConfigError(f"trainer.strategy '{strategy}' on several devices needs one process per rank: use "
                          "'ddp_spawn', or the submitit executor with parameters.tasks_per_node = devices")


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """The config with passwords in database URLs masked (it is written to run.json and W&B)."""
    storage = config.get("optuna_storage")
    if isinstance(storage, str):
        config = {**config, "optuna_storage": re.sub(r"://([^:/@]+):[^@]+@", r"://\1:***@", storage)}
    return config


class BenchmarkRun:
    """One invocation of ``ppgbench benchmark`` on a resolved config.

    Args:
        config: The resolved config (suite keys plus anything else, recorded in ``run.json``).
        options: Run folder, executor, W&B and reporting settings.
    """

    def __init__(self, config: dict[str, Any], options: RunOptions) -> None:
        self.config, self.options = config, options
        self.run_dir = Path(options.output_dir)
        self.suite_config = {k: config.get(k) for k in SUITE_KEYS}

    def run(self) -> RunReport:
        """Run every pending job of the plan; return what happened."""
        suite = suite_for(self.suite_config, self.run_dir)
        check_strategy(suite, self.options.executor)
        plan = suite.plan()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fresh = [instantiate(Regime, entry) for entry in suite.config["regimes"]]  # never state from earlier runs
        meta = check_or_write_identity(self.run_dir, run_identity(suite.encoders, suite.datamodules.values(), fresh), {
            "config": redact(self.config), "versions": package_versions(),
            "device": device_string(suite.trainer_kwargs), "seeds": suite.seeds, "folds": suite.folds,
            "parameters": parameter_counts(suite.encoders),
            "planned_jobs": [j.job_id for j in plan],
        })
        records: dict[str, dict[str, Any]] = {}
        pending: list[Job] = []
        for job in plan:
            record = read_record(self.run_dir, job.job_id)
            if record is not None and record.get("status") == "ok":
                records[job.job_id] = slim(record)
            else:
                pending.append(job)
        report = RunReport(planned=len(plan), completed=0, skipped=len(records))
        start = suite.cache.stats()  # the suite (and its counters) may be reused by a later run in this process
        self._prepare(suite, pending)
        report.cache = {k: v - start[k] for k, v in suite.cache.stats().items()}  # workers' use is added per job
        tracker = self._tracker(plan, pending, meta)
        self._execute(plan, pending, records, report, tracker, meta)
        report.summary_path = self._write_summary(records)
        self._write_status(records, plan, report)
        return report

    def _prepare(self, suite: BenchmarkSuite, pending: Sequence[Job]) -> None:
        """Load every pending (dataset, rate) once, so bad data fails now; then fill the embedding cache."""
        rates: dict[str, set[float]] = {}
        for job in pending:
            rates.setdefault(job.task.dataset, set()).add(float(suite.encoders[job.model].sampling_rate))
        for dataset, fs in rates.items():
            suite.datamodules[dataset].check(sorted(fs))
        needed = list(dict.fromkeys((j.model, j.task.dataset) for j in pending if suite.uses_cache(j)))
        for model, dataset in needed:
            suite.source.get(suite.encoders[model], suite.datamodules[dataset])

    def _tracker(self, plan: Sequence[Job], pending: Sequence[Job], meta: dict[str, Any]) -> CellTracker | None:
        if not wandb_enabled(self.options.wandb):
            return None
        cells: dict[tuple[str, str, str], list[str]] = {}
        for job in plan:
            cells.setdefault(job.cell, []).append(job.job_id)
        tracker = CellTracker(self.run_dir, self.options.wandb_project, meta["run_uid"], redact(self.config), cells,
                              [j.job_id for j in pending])
        tracker.start()
        return tracker

    def _execute(self, plan: Sequence[Job], pending: Sequence[Job],
                 records: dict[str, dict[str, Any]], report: RunReport, tracker: CellTracker | None,
                 meta: dict[str, Any]) -> None:
        executor = self.options.executor
        per_job = "per-job" if self.options.wandb == "per-job" and wandb_enabled("per-job") else "off"
        specs = [JobSpec(str(self.run_dir), self.suite_config, j.job_id, executor.threads_per_job(), per_job,
                         self.options.wandb_project, meta["run_uid"]) for j in pending]
        bar = tqdm(total=len(plan), initial=len(records), desc="jobs", unit="job",
                   mininterval=progress_interval(), disable=not self.options.progress,
                   file=sys.stderr, dynamic_ncols=True)
        last = time.monotonic()
        try:
            for spec, result in executor.run(run_job_spec, specs, self.run_dir):
                outcome = result if isinstance(result, JobOutcome) else \
                    JobOutcome(spec.job_id, "lost", f"{type(result).__name__}: {result}".splitlines()[0])
                self._account(outcome, records, report)
                if tracker is not None:
                    tracker.finished(spec.job_id)
                bar.set_postfix_str(spec.job_id.split("__", 1)[-1])
                bar.update(1)
                if time.monotonic() - last >= self.options.summary_every_s:
                    self._write_summary(records)
                    last = time.monotonic()
                self._write_status(records, plan, report)
        except KeyboardInterrupt:
            self._write_summary(records)
            self._write_status(records, plan, report)
            print(f"\ninterrupted after {len(records)} of {len(plan)} jobs (jobs finishing now are kept); "
                  "run the same command again to continue", file=sys.stderr)
            raise
        finally:
            bar.close()

    def _account(self, outcome: JobOutcome, records: dict[str, dict[str, Any]], report: RunReport) -> None:
        for k, v in outcome.cache.items():
            report.cache[k] = report.cache.get(k, 0) + v
        if outcome.status in ("ok", "done"):
            record = read_record(self.run_dir, outcome.job_id)
            if record is not None and record.get("status") == "ok":
                records[outcome.job_id] = slim(record)
                if outcome.status == "ok":
                    report.completed += 1
                else:
                    report.skipped += 1
                return
            outcome = JobOutcome(outcome.job_id, "lost", "the worker reported success but no record is on disk")
        report.failed.append(f"{outcome.job_id}: {outcome.error}" + (" (lost: runs again next time)"
                                                                      if outcome.status == "lost" else ""))

    def _write_summary(self, records: dict[str, dict[str, Any]]) -> Path:
        return write_summary(self.run_dir, records.values(), self.options.ci_unit)

    def _write_status(self, records: dict[str, dict[str, Any]], plan: Sequence[Job], report: RunReport) -> None:
        write_json_atomic(self.run_dir / "status.json", {
            "completed": len(records), "failed": len(report.failed), "planned": len(plan),
            "complete": len(records) == len(plan), "cache": report.cache,
        })
