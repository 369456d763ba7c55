"""The one function every executor runs: a picklable job spec in, the job's record on disk, a short outcome out.

A :class:`JobSpec` is (run folder, suite config dict, job id) plus a few run settings; the worker
rebuilds the suite from the dict (once per process and thread), finds the job by id, runs it under the
job lock through :func:`~ppgbench_pl.benchmark.job.execute_job` (which writes the record), and returns a
:class:`JobOutcome` small enough to send back over any channel. The record on disk, not the outcome,
is what says the job is done.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

_threads_set: int | None = None
_quiet = False


@dataclass(frozen=True)
class JobSpec:
    """Everything a worker needs for one job, as plain data.

    Attributes:
        run_dir: Run folder (shared with the coordinator: same machine or a shared file system).
        config: The resolved config, parsed here with the CLI's parser (:func:`~ppgbench_pl.benchmark.suite.suite_for`).
        job_id: Which job of the suite's plan to run.
        threads: Torch/BLAS threads while this spec's jobs run, restored after (``None``: leave as is); the
            thread policy's choice for its regime (``benchmark/thread_policy.py``).
        wandb: ``per-job`` to log this job as its own W&B run from the worker.
        wandb_project: W&B project.
        run_uid: The run folder's id (W&B run ids are derived from it).
        run_config: The resolved config as given (logged with a per-job W&B run).
        group: Jobs of one (model, task, regime), ``job_id`` first, that the regime trains together
            (the neural regimes' ``stack_jobs``); empty for a job run alone.
    """

    run_dir: str
    config: str
    job_id: str
    threads: int | None = None
    wandb: str = "off"
    wandb_project: str = "ppgbench"
    run_uid: str = ""
    run_config: dict[str, Any] = field(default_factory=dict)
    group: tuple[str, ...] = ()
    #: Import path of what parses :attr:`config` into the suite where the coordinator's is not at hand.
    parse: str | None = None


@dataclass
class JobOutcome:
    """What a worker reports back: status (``ok``, ``failed``, ``done`` by another process, ``lost``)."""

    job_id: str
    status: str
    error: str | None = None
    seconds: float = 0.0
    worker: str = ""
    cache: dict[str, int] = field(default_factory=dict)
    #: One outcome per job of a group spec (the spec's own outcome then only carries the cache counts).
    members: list[JobOutcome] = field(default_factory=list)


class JobLost(RuntimeError):
    """The infrastructure lost a job (a dead worker, a SLURM task that ended without a result).

    Its message says how, in one line; the job runs again next time.
    """


def global_rank() -> int:
    """The rank of this process in a multi-process (DDP) job launched per task, 0 otherwise."""
    for name in ("RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    if int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1 and os.environ.get("SLURM_PROCID", "").isdigit():
        return int(os.environ["SLURM_PROCID"])
    return 0


def limit_threads(threads: int | None) -> None:
    """Give torch and the BLAS pools ``threads`` threads for the rest of this worker process (its default)."""
    global _threads_set
    if threads is None or threads == _threads_set:
        return
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)
    _threads_set = threads


def _watch_parent(parent: int, period_s: float = 0.5) -> None:
    while True:
        time.sleep(period_s)
        if os.getppid() != parent:  # the coordinator died (SIGKILL): do not linger as an orphan
            os._exit(3)


def init_worker(threads: int | None, gpu_queue: Any = None, gpu: int | None = None) -> None:
    """Process-pool initializer: thread limits, one GPU per worker when given, exit with the parent."""
    if gpu_queue is not None:
        gpu = gpu_queue.get()
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    limit_threads(threads)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True, name="ppgbench-parent").start()


def run_job_spec(spec: JobSpec) -> JobOutcome:
    """Run one job (or a group of jobs) where this function is called (any executor) and report how it went.

    The jobs run at ``spec.threads`` torch and BLAS threads; the process's own counts are restored after.
    """
    from ppgbench_pl.probes.threads import intra_op_threads

    with intra_op_threads(spec.threads):
        return _run_spec(spec)


def _run_spec(spec: JobSpec) -> JobOutcome:
    from ppgbench_pl.benchmark.budget import budget_label
    from ppgbench_pl.benchmark.job import execute_group, execute_job, is_done
    from ppgbench_pl.benchmark.suite import suite_for

    global _quiet
    start = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        if not _quiet:  # inner trainers run by the hundred in every worker: keep their banners out
            from ppgbench_pl.benchmark.console import quiet_lightning

            quiet_lightning()
            _quiet = True
        suite = suite_for(spec.config, spec.run_dir, spec.parse)
        jids = list(spec.group) or [spec.job_id]
        jobs = {jid: suite.job(jid) for jid in jids}
        before = suite.cache.stats()
        rank = global_rank()
        extras: dict[str, dict[str, Any]] = {
            jid: {"model": job.model_name, "task": job.task.name, "worker": worker,
                  "budget": budget_label(suite.budget.name, job.regime.deviations())}
            for jid, job in jobs.items()}

        def make_context(jid: str) -> Any:
            seen = suite.cache.stats()
            ctx = suite.context(jobs[jid])
            now = suite.cache.stats()
            extras[jid]["embedding_cache"] = "miss" if now["misses"] > seen["misses"] else \
                "hit" if now["hits"] > seen["hits"] else None
            return ctx

        if rank != 0:
            ran_records = [({"status": "done"}, False) if is_done(spec.run_dir, jid)
                           else _run_unlocked(suite, jobs[jid], extras[jid]) for jid in jids]
        elif len(jids) > 1:
            ran_records = execute_group(spec.run_dir, jids, make_context, jobs[jids[0]].regime, extras)
        else:
            ran_records = [execute_job(spec.run_dir, jids[0], lambda: make_context(jids[0]), jobs[jids[0]].regime,
                                       extra=extras[jids[0]])]
        after = suite.cache.stats()
        cache = {k: after[k] - before[k] for k in after}
        return _outcome(spec, list(zip(jids, ran_records, strict=True)), worker, cache,
                        time.perf_counter() - start, log_wandb=rank == 0)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the job could not even be set up here; report, never raise
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        seconds = round(time.perf_counter() - start, 3)
        failed = [JobOutcome(jid, "failed", f"{message} (while setting the job up on {worker})", seconds, worker)
                  for jid in (list(spec.group) or [spec.job_id])]
        return failed[0] if len(failed) == 1 else JobOutcome(spec.job_id, "group", None, 0.0, worker, {}, failed)


def _outcome(spec: JobSpec, finished: list[tuple[str, tuple[dict[str, Any], bool]]],
             worker: str, cache: dict[str, int], seconds: float, log_wandb: bool) -> JobOutcome:
    """The spec's outcome: its one job's, or a group outcome holding one per member (each logged to W&B)."""
    share = round(seconds / len(finished), 3)
    outcomes = []
    for jid, (record, ran) in finished:
        if ran and log_wandb and spec.wandb == "per-job":
            from ppgbench_pl.benchmark.tracking import log_job_run

            log_job_run(replace(spec, job_id=jid, group=()), record, spec.run_config)
        status = record.get("status", "failed") if ran else "done"
        outcomes.append(JobOutcome(jid, status, record.get("error") if ran else None, share, worker))
    if len(outcomes) == 1:
        outcomes[0].cache = cache
        return outcomes[0]
    return JobOutcome(spec.job_id, "group", None, round(seconds, 3), worker, cache, outcomes)


def _run_unlocked(suite: Any, job: Any, extra: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A non-zero rank of a DDP job: run alongside rank 0 (which holds the lock), write nothing."""
    from ppgbench_pl.benchmark.job import run_job

    record, _ = run_job(suite.context(job), job.regime)
    return {**record, **extra}, True
