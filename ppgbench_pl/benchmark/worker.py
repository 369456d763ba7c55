"""What every executor runs: a picklable :class:`JobSpec` in, the record on disk, a short :class:`JobOutcome` out."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

_quiet = False


@dataclass(frozen=True)
class JobSpec:
    """Everything a worker needs for one job, as plain data.

    Attributes:
        run_dir: Run folder (shared with the coordinator: same machine or a shared file system).
        config: The resolved config, parsed here with the CLI's parser (:func:`~ppgbench_pl.benchmark.suite.suite_for`).
        threads: Torch/BLAS threads while this spec's jobs run (``None``: leave as is), as the thread policy chose.
        wandb: ``per-job`` to log this job as its own W&B run from the worker (``run_uid``: W&B run ids derive from it;
            ``run_config``: the resolved config logged with it).
        group: Jobs of one (model, task, regime), ``job_id`` first, that the regime trains together (``stack_jobs``).
        parse: Import path of what parses :attr:`config` into the suite where the coordinator's is not at hand.
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
    """The infrastructure lost a job (a dead worker, a SLURM task that ended without a result); it runs again."""


def global_rank() -> int:
    """The rank of this process in a multi-process (DDP) job launched per task, 0 otherwise."""
    for name in ("RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    if int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1 and os.environ.get("SLURM_PROCID", "").isdigit():
        return int(os.environ["SLURM_PROCID"])
    return 0


def _watch_parent(parent: int, period_s: float = 0.5) -> None:
    while True:
        time.sleep(period_s)
        if os.getppid() != parent:  # the coordinator died (SIGKILL): do not linger as an orphan
            os._exit(3)


def init_worker(threads: int | None, gpu: int | None = None) -> None:
    """A pool worker's start: its torch/BLAS threads, its one GPU when given, exit with the parent."""
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if threads is not None:
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(threads)
        threadpool_limits(limits=threads)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True, name="ppgbench-parent").start()


def run_job_spec(spec: JobSpec) -> JobOutcome:
    """Run one job (or a group) here, at ``spec.threads`` threads (restored after), and report how it went."""
    from ppgbench_pl.probes.threads import intra_op_threads

    with intra_op_threads(spec.threads):
        return _run_spec(spec)


def _run_spec(spec: JobSpec) -> JobOutcome:
    from ppgbench_pl.benchmark.budget import budget_label
    from ppgbench_pl.benchmark.job import execute_group
    from ppgbench_pl.benchmark.suite import suite_for
    from ppgbench_pl.results.folder_sync import read_record_complete

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

        if rank != 0:  # a DDP rank beside rank 0 (which holds the lock): run alongside it, write nothing
            ran_records = [({"status": "done"}, False) if read_record_complete(spec.run_dir, jid) is not None
                           else _run_unlocked(suite, jobs[jid], extras[jid]) for jid in jids]
        else:
            ran_records = execute_group(spec.run_dir, jids, make_context, jobs[jids[0]].regime, extras)
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
    from ppgbench_pl.benchmark.job import run_job

    record, _ = run_job(suite.context(job), job.regime)
    return {**record, **extra}, True
