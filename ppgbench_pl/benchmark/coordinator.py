"""The one engine behind ``ppgbench fit`` and ``benchmark``: check (nothing written), embed, execute, summarise."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.benchmark.budget import budget_label
from ppgbench_pl.benchmark.executors import Executor
from ppgbench_pl.benchmark.groups import job_groups, member_outcomes
from ppgbench_pl.benchmark.identity import (
    check_or_write_identity,
    device_string,
    package_versions,
    parameter_counts,
    read_run_json,
    suite_identity,
)
from ppgbench_pl.benchmark.job import discard_unfinished, read_record
from ppgbench_pl.benchmark.plan import Job
from ppgbench_pl.benchmark.preflight import (
    check_output_dir,
    check_precision,
    check_strategy,
    degenerate_jobs,
    describe_degenerate,
    describe_skipped,
    evaluable_plan,
    record_not_evaluable,
    redact,
)
from ppgbench_pl.benchmark.progress import run_progress
from ppgbench_pl.benchmark.run_report import (
    SIGNALLED,
    Interrupted,
    RunReport,
    end_of_command,
    import_output_libraries,
    signals_deferred,
    signals_interrupt,
)
from ppgbench_pl.benchmark.setup import ProtocolSetup
from ppgbench_pl.benchmark.suite import BenchmarkSuite, keep_suite
from ppgbench_pl.benchmark.thread_policy import choose_policy
from ppgbench_pl.benchmark.tracking import CellTracker, close_wandb, offline_notice, wandb_enabled
from ppgbench_pl.benchmark.worker import JobOutcome, JobSpec, run_job_spec
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import file_lock
from ppgbench_pl.probes.threads import intra_op_threads
from ppgbench_pl.results.fold_entry import MalformedRecord
from ppgbench_pl.results.folder_sync import (
    FolderSync,
    folder_status,
    merged_extras,
    summary_lock_path,
)
from ppgbench_pl.results.records import RESULTS_FILE, job_dir
from ppgbench_pl.results.summary import SummaryBook


class BenchmarkRun:
    """One ``ppgbench fit``/``benchmark`` invocation (``summary_every_s``: least seconds between summary rewrites)."""

    def __init__(self, setup: ProtocolSetup, summary_every_s: float = 5.0) -> None:
        self.setup, self.settings, self.threads = setup, setup.settings, setup.actions.get("threads")
        self.config = redact(dict(setup.config))
        #: What a worker parses to rebuild the suite (a key of this process's own suite when it holds objects).
        self.resolved = setup.resolved or f"in-process:{id(setup.suite)}"
        self.run_dir = Path(self.settings.output_dir)
        self.summary_every_s = summary_every_s
        self.book = SummaryBook(self.settings.ci_unit, every_s=summary_every_s)
        self.folder = FolderSync(self.book, self.run_dir)
        self.union_planned: list[str] = []
        self.status_extra: dict[str, Any] = {}  # what else status.json lists (tasks skipped, folds not evaluable)
        keep_suite(self.resolved, setup.suite)  # this command's jobs in this process share its suite

    def suite(self) -> BenchmarkSuite:
        """The suite LightningCLI built (the local executor's jobs run on it too)."""
        suite = self.setup.suite
        suite.source.max_bytes = self.settings.max_cache_gb * 1e9
        return suite

    def dry_run(self) -> str:
        """The plan table and its cost estimate, after the real run's checks (refused with the same lines)."""
        from ppgbench_pl.benchmark.estimate import dry_run_text
        from ppgbench_pl.benchmark.thread_policy import thread_override

        thread_override(self.threads)  # a bad --threads or PPGBENCH_THREADS: refused as the run refuses it
        return dry_run_text(self)

    def run(self) -> RunReport:
        """Run every pending job of the plan; return what happened."""
        executor: Executor = self.setup.executor
        executor.check()  # an unreachable scheduler or a refused partition: one line, nothing computed
        self.policy = policy = choose_policy(executor, self.threads)  # a bad override: one line, nothing written
        suite = self.suite()
        check_strategy(suite, executor)
        check_precision(suite)
        check_output_dir(self.run_dir)
        plan = self._check_data(suite, suite.plan())
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # the folder can still go away or turn read-only after check_output_dir
            raise ConfigError(f"--output_dir {self.run_dir}: cannot be made ({exc.strerror})") from None
        meta = check_or_write_identity(
            self.run_dir, suite_identity(suite), {
                "config": self.config, "versions": package_versions(),
                "device": device_string(suite.trainer_kwargs), "seeds": suite.seeds, "folds": suite.folds,
                "parameters": parameter_counts(suite.encoders), "planned_jobs": [j.job_id for j in plan],
                "threads": policy.record()}, allow_code_change=self.settings.allow_code_change)
        self.union_planned = list(meta["planned_jobs"])
        for problem in self.folder.sync(deep=True):  # every record in the folder (any plan wrote it)
            print(f"warning: {problem}; that job runs again", file=sys.stderr)
        done = self.book.ok_ids | self._settle_degenerate(suite, plan)
        pending = [j for j in plan if j.job_id not in done]
        report = RunReport(planned=len(plan), completed=0, skipped=len(plan) - len(pending),
                           not_evaluable=len(self.status_extra.get("not_evaluable_jobs") or ()))
        report.skipped -= report.not_evaluable
        start = suite.cache.stats()  # the suite (and its counters) may be reused by a later run in this process
        tracker = self._tracker(plan, pending, meta)
        import_output_libraries()
        if self.settings.progress:  # with the progress lines (--progress false: run.json still says it)
            print(policy.line(), file=sys.stderr, flush=True)
        with signals_interrupt():
            try:
                self._prepare(suite, pending)
                report.cache = {k: v - start[k] for k, v in suite.cache.stats().items()}
                self._execute(executor, plan, pending, report, tracker, meta)
            except (Interrupted, KeyboardInterrupt) as exc:
                report.interrupted = exc.exit_code if isinstance(exc, Interrupted) else 130
            finally:
                with signals_deferred():
                    if report.interrupted is not None:
                        self._settle_interrupted(pending, report)
                    report.summary_path = self._write_outputs(report)
                    if tracker is not None:
                        close_wandb()
        return end_of_command(report)

    def _check_data(self, suite: BenchmarkSuite, plan: Sequence[Job]) -> list[Job]:
        """The plan, its data loaded (bad data fails before anything is written), tasks that cannot run skipped."""
        kept, skipped = evaluable_plan(suite, plan)
        self.looked_at = ({j.task.name for j in plan}, {j.job_id for j in plan})  # for status.json's lists
        if skipped:
            self.status_extra["skipped_tasks"] = skipped
        for line in filter(None, (skipped and describe_skipped(skipped), suite.fit_notice())):  # one line each
            print(line, file=sys.stderr)
        for model, dataset in dict.fromkeys((j.model, j.task.dataset) for j in kept if suite.uses_cache(j)):
            suite.source.check_space(suite.encoders[model], suite.datamodules[dataset])
        return kept

    def _settle_degenerate(self, suite: BenchmarkSuite, plan: Sequence[Job]) -> set[str]:
        """Record the jobs whose outer fold is not evaluable (one class in a part) without training them."""
        found = degenerate_jobs(suite, plan)
        if found:
            print(describe_degenerate(found), file=sys.stderr)
        jobs = {j.job_id: j for j in plan}
        for jid, reason in found.items():
            job = jobs[jid]
            record_not_evaluable(self.run_dir, job, float(suite.encoders[job.model].sampling_rate), reason,
                                 budget_label(suite.budget.name, job.regime.deviations()))
        self.status_extra["not_evaluable_jobs"] = dict(sorted(found.items()))
        return set(found)

    def _prepare(self, suite: BenchmarkSuite, pending: Sequence[Job]) -> None:
        """Fill the embedding cache for the pending jobs (one pass per encoder, dataset and rate)."""
        needed = list(dict.fromkeys((j.model, j.task.dataset) for j in pending if suite.uses_cache(j)))
        with intra_op_threads(self.policy.embedding_pass):  # the encoders' forward passes: every core (policy)
            for model, dataset in needed:
                suite.source.get(suite.encoders[model], suite.datamodules[dataset])

    def _tracker(self, plan: Sequence[Job], pending: Sequence[Job], meta: dict[str, Any]) -> CellTracker | None:
        if not wandb_enabled(self.settings.wandb):
            return None
        if notice := offline_notice(self.run_dir):
            print(notice, file=sys.stderr, flush=True)
        cells: dict[tuple[str, str, str], list[str]] = {}
        for job in plan:
            cells.setdefault(job.cell, []).append(job.job_id)
        tracker = CellTracker(self.run_dir, self.settings.wandb_project, meta["run_uid"], self.config, cells,
                              [j.job_id for j in pending], summary_of=self.cell_summary)
        tracker.start()
        return tracker

    def cell_summary(self, cell: tuple[str, str, str]) -> dict[str, Any] | None:
        """The summary row of one (model, task, regime) cell over the whole folder (what summary.csv says)."""
        model, task, regime = cell
        table = self.book.summary()
        mine = table[(table["model"] == model) & (table["task"] == task) & (table["regime"] == regime)]
        return None if not len(mine) else mine.iloc[0].to_dict()

    def _execute(self, executor: Executor, plan: Sequence[Job], pending: Sequence[Job], report: RunReport,
                 tracker: CellTracker | None, meta: dict[str, Any]) -> None:
        per_job = "per-job" if self.settings.wandb == "per-job" and wandb_enabled("per-job") else "off"
        uses = {j.job_id: j.regime.uses_embeddings for j in pending}  # probe work or encoder work (thread policy)
        trains = {j.job_id: j.regime.trains_trials for j in pending}  # worth a job process of its own
        specs = [JobSpec(str(self.run_dir), self.resolved, group[0], self.policy.for_job(uses[group[0]]), per_job,
                         self.settings.wandb_project, meta["run_uid"], self.config,
                         tuple(group) if len(group) > 1 else (), self.setup.parse, trains[group[0]])
                 for group in job_groups(pending, self.policy.processes or 1)]
        progress = run_progress(self.suite(), plan, pending, report.skipped + report.not_evaluable, self.settings)
        last = time.monotonic()
        stream = executor.run(run_job_spec, specs, self.run_dir)
        try:
            for spec, result in stream:
                for outcome in member_outcomes(spec, result):
                    self._account(outcome, report)
                    if tracker is not None:
                        tracker.finished(outcome.job_id)
                    progress.update(outcome.job_id.split("__", 1)[-1], outcome.job_id)
                if SIGNALLED:  # the signal's exception was swallowed inside the job: stop now
                    raise Interrupted(SIGNALLED[-1])
                if time.monotonic() - last >= self.summary_every_s:
                    self._write_outputs(report)
                    last = time.monotonic()
        finally:
            stream.close()  # on an interrupt: the executor stops its workers now, not when collected
            progress.close()

    def _settle_interrupted(self, pending: Sequence[Job], report: RunReport) -> None:
        """After an interrupt: count the jobs whose records landed (from the folder), drop half-written ones."""
        counted = self.book.ok_ids
        ids = [j.job_id for j in pending if j.job_id not in counted]
        for jid in ids:
            record = read_record(self.run_dir, jid)
            if record is not None and record.get("status") == "ok" and self._add_record(record):
                report.completed += 1
        discard_unfinished(self.run_dir, ids)

    def _add_record(self, record: dict[str, Any]) -> bool:
        """Count a record from disk; a damaged ``ok`` one (left by a failed or lost rerun) is named and left out."""
        try:
            self.book.add(record)
        except MalformedRecord as exc:
            jid = str(record.get("job_id") or "")
            self.book.discard(jid)
            print(f"warning: {job_dir(self.run_dir, jid) / RESULTS_FILE}: {exc}; left out of the summary, "
                  "it runs again next time", file=sys.stderr, flush=True)
            return False
        return True

    def _account(self, outcome: JobOutcome, report: RunReport) -> None:
        for k, v in outcome.cache.items():
            report.cache[k] = report.cache.get(k, 0) + v
        if outcome.status in ("ok", "done"):
            record = read_record(self.run_dir, outcome.job_id)
            if record is not None and record.get("status") == "ok":
                self.book.add(record)
                if outcome.status == "ok":
                    report.completed += 1
                else:
                    report.skipped += 1
                return
            outcome = JobOutcome(outcome.job_id, "lost", "the worker reported success but no record is on disk")
        if outcome.status == "lost":
            print(f"lost: {outcome.job_id} ({outcome.error}); it runs again next time", file=sys.stderr, flush=True)
        if record_failed := read_record(self.run_dir, outcome.job_id):
            self._add_record(record_failed)
        report.failed.append(f"{outcome.job_id}: {outcome.error}" + (" (lost: runs again next time)"
                                                                      if outcome.status == "lost" else ""))
        report.failed_ids.add(outcome.job_id)

    def _write_outputs(self, report: RunReport) -> Path:
        """``summary.csv`` and ``status.json`` over every record on disk and every plan of ``run.json`` (locked)."""
        with file_lock(summary_lock_path(self.run_dir)):
            self.folder.sync()
            path = self.run_dir / "run.json"
            planned = set(self.union_planned)
            if path.exists():
                planned |= set(read_run_json(path).get("planned_jobs") or [])
            summary = self.book.write(self.run_dir, force=True)
            assert summary is not None
            write_json_atomic(self.run_dir / "status.json", {
                **folder_status(self.folder, planned, report.failed_ids),
                "this_command": {"planned": report.planned, "completed": report.completed,
                                 "skipped": report.skipped, "failed": len(report.failed)},
                "cache": report.cache, **merged_extras(self.run_dir, self.status_extra, *self.looked_at),
            })
        return summary
