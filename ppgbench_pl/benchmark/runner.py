"""``ppgbench fit``'s in-process runner: one datamodule's plan into a run folder, job after job.

Embeddings come once per encoder from the shared cache, records are written atomically by
:func:`~ppgbench_pl.benchmark.job.execute_job` (so an interrupted run continues where it stopped and a
failed job is recorded with its reason while the plan goes on; failed jobs are retried on the next
run), and the summary, status and Lightning loggers are updated after every job. ``ppgbench
benchmark`` (:mod:`ppgbench_pl.benchmark.coordinator`) runs the same jobs through any executor.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from lightning.pytorch.loggers import Logger
from tqdm.auto import tqdm

from ppgbench_pl.benchmark.cache import EmbeddingCache
from ppgbench_pl.benchmark.embeddings import EmbeddingSource, extract_embeddings, needs_embeddings
from ppgbench_pl.benchmark.identity import (
    check_or_write_identity,
    device_string,
    package_versions,
    parameter_counts,
    run_identity,
)
from ppgbench_pl.benchmark.job import execute_job, read_record
from ppgbench_pl.benchmark.plan import Job, build_plan, progress_interval
from ppgbench_pl.data.processed import write_json_atomic
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.regimes.base import JobContext, Regime
from ppgbench_pl.results.summary import write_summary

__all__ = ["ProtocolRunner", "RunReport", "extract_embeddings"]


@dataclass
class RunReport:
    """What a run did."""

    planned: int
    completed: int
    skipped: int
    failed: list[str] = field(default_factory=list)
    summary_path: Path | None = None
    cache: dict[str, int] = field(default_factory=dict)


class ProtocolRunner:
    """Evaluate encoders x tasks x regimes x seeds x folds of one datamodule into ``output_dir``.

    Args:
        output_dir: Run folder (``run.json``, ``summary.csv``, ``status.json``, ``jobs/``, ``embeddings/``).
        datamodule: Data, tasks, seeds and folds.
        encoders: Models to evaluate (the model under test and the controls).
        regimes: Regime callbacks to run.
        trainer_kwargs: Device settings for every inner trainer (accelerator, devices, precision).
        loggers: Lightning loggers that receive per-job metrics and the final summary.
        config: Resolved config, stored in ``run.json``.
        ci_unit: ``seed`` (published) or ``fold``, see :mod:`ppgbench_pl.results.summary`.
        progress: Show a progress bar over jobs.
    """

    def __init__(self, output_dir: str | Path, datamodule: PPGDataModule, encoders: Sequence[PPGEncoder],
                 regimes: Sequence[Regime], trainer_kwargs: dict[str, Any] | None = None,
                 loggers: Sequence[Logger] = (), config: dict[str, Any] | None = None, ci_unit: str = "seed",
                 progress: bool = True) -> None:
        self.output_dir = Path(output_dir)
        self.datamodule, self.encoders, self.regimes = datamodule, list(encoders), list(regimes)
        self.trainer_kwargs = dict(trainer_kwargs or {})
        self.loggers, self.config, self.ci_unit, self.progress = list(loggers), config or {}, ci_unit, progress
        names = [e.name for e in self.encoders]
        if len(set(names)) != len(names):
            raise ValueError(f"encoder names must be unique, got {names}")
        self.cache = EmbeddingCache(self.output_dir / "embeddings")
        self.source = EmbeddingSource(self.cache, self.trainer_kwargs)

    def plan(self) -> list[Job]:
        """All jobs of this run."""
        dm = self.datamodule
        return build_plan(self.encoders, dm.task_specs, self.regimes, dm.seeds, dm.folds)

    def identity(self) -> dict[str, Any]:
        """What results in this folder depend on (not which subset of jobs is run)."""
        return run_identity(self.encoders, [self.datamodule], self.regimes)

    def embeddings(self, encoder: PPGEncoder) -> np.ndarray:
        """Cached frozen embeddings of every window at the encoder's rate."""
        return self.source.get(encoder, self.datamodule)

    def _done(self, job: Job) -> dict[str, Any] | None:
        record = read_record(self.output_dir, job.job_id)
        return record if record is not None and record.get("status") == "ok" else None

    def _context(self, job: Job) -> JobContext:
        encoder = self.encoders[job.model]
        embeddings = self.embeddings(encoder) if needs_embeddings(job.regime.uses_embeddings, encoder) else None
        return JobContext(job.job_id, job.model_name, encoder, job.task, job.seed, job.fold, self.datamodule,
                          self.output_dir / "search" / job.job_id, embeddings, self.trainer_kwargs)

    def run(self) -> RunReport:
        """Execute every job not yet done; rewrite summary and status after each."""
        plan = self.plan()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        check_or_write_identity(self.output_dir, self.identity(), {
            "config": self.config, "versions": package_versions(), "device": device_string(self.trainer_kwargs),
            "seeds": self.datamodule.seeds, "folds": self.datamodule.folds,
            "parameters": parameter_counts(self.encoders), "planned_jobs": [j.job_id for j in plan],
        })
        records = {j.job_id: r for j in plan if (r := self._done(j)) is not None}
        report = RunReport(planned=len(plan), completed=0, skipped=len(records))
        bar = tqdm(total=len(plan), initial=len(records), desc="jobs", unit="job",
                   mininterval=progress_interval(), disable=not self.progress,
                   file=sys.stderr, dynamic_ncols=True)
        try:
            for job in plan:
                if job.job_id in records:
                    continue
                bar.set_postfix_str(f"{job.model_name} {job.task.name} {job.regime.name} s{job.seed} f{job.fold}")
                record, ran = execute_job(self.output_dir, job.job_id, lambda job=job: self._context(job),
                                          job.regime, extra={"model": job.model_name, "task": job.task.name})
                records[job.job_id] = record
                if not ran:
                    report.skipped += 1
                elif record["status"] == "ok":
                    report.completed += 1
                else:
                    report.failed.append(f"{job.job_id}: {record['error']}")
                self._after_job(records, plan, len(records) - report.skipped, record)
                bar.update(1)
        finally:
            bar.close()
        report.summary_path = self._write_summary(records, plan)
        report.cache = self.cache.stats()
        self._finish_logging(report)
        return report

    def _write_summary(self, records: dict[str, dict[str, Any]], plan: list[Job]) -> Path:
        path = write_summary(self.output_dir, records.values(), self.ci_unit)
        ok = sum(r.get("status") == "ok" for r in records.values())
        write_json_atomic(self.output_dir / "status.json", {
            "completed": ok, "failed": len(records) - ok, "planned": len(plan), "complete": ok == len(plan),
        })
        return path

    def _after_job(self, records: dict[str, dict[str, Any]], plan: list[Job], step: int, record: dict[str, Any]) -> None:
        self._write_summary(records, plan)
        if record["status"] != "ok":
            return
        prefix = f"{record['model']}/{record['task']}/{record['regime']}"
        value = float(np.mean([r["metrics"][record["metric"]] for r in record["results"]]))
        metrics = {f"{prefix}/{record['metric']}": value, "jobs_done": float(step)}
        if record.get("baseline", {}).get(record["metric"]) is not None:
            metrics[f"constant/{record['task']}/{record['regime']}/{record['metric']}"] = record["baseline"][record["metric"]]
        for logger in self.loggers:
            logger.log_metrics(metrics, step=step)

    def _finish_logging(self, report: RunReport) -> None:
        import pandas as pd

        for logger in self.loggers:
            logger.log_hyperparams({"config": self.config})
            if report.summary_path is not None and hasattr(logger, "log_table"):
                logger.log_table(key="summary", dataframe=pd.read_csv(report.summary_path))
            logger.finalize("success" if not report.failed else "failed")
