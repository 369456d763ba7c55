"""What every executor runs (a :class:`JobSpec` in, a record on disk, a :class:`JobOutcome` out), and the pool."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any

_quiet = False


@dataclass(frozen=True)
class JobSpec:
    """Everything a worker needs for one job (or a ``group`` the regime trains together, ``job_id`` first)."""

    run_dir: str  # shared with the coordinator: same machine or a shared file system
    config: str  # the resolved config, parsed by ``parse`` (an import path) where the coordinator's suite is not
    job_id: str
    threads: int | None = None  # torch/BLAS threads while its jobs run (None: leave as is)
    wandb: str = "off"  # ``per-job``: logged as its own W&B run from the worker, with ``run_config``
    wandb_project: str = "ppgbench"
    run_uid: str = ""
    run_config: dict[str, Any] = field(default_factory=dict)
    group: tuple[str, ...] = ()
    parse: str | None = None
    #: Trains networks (stacked trials, finetuning): worth a process of its own beside others on this machine.
    side_by_side: bool = False


@dataclass
class JobOutcome:
    """What a worker reports back: status (``ok``, ``failed``, ``done`` by another process, ``lost``)."""

    job_id: str
    status: str
    error: str | None = None
    cache: dict[str, int] = field(default_factory=dict)
    #: One outcome per job of a group spec (the first carries the spec's cache counts).
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


def run_job_spec(spec: JobSpec) -> JobOutcome:
    """Run one job (or a group) here, at ``spec.threads`` threads (restored after), and report how it went."""
    from ppgbench_pl.benchmark.budget import budget_label
    from ppgbench_pl.benchmark.job import execute_group, run_job
    from ppgbench_pl.benchmark.suite import suite_for
    from ppgbench_pl.probes.threads import intra_op_threads
    from ppgbench_pl.results.folder_sync import read_record_complete

    global _quiet
    worker, jids = f"{socket.gethostname()}:{os.getpid()}", list(spec.group) or [spec.job_id]
    with intra_op_threads(spec.threads):
        try:
            if not _quiet:  # inner trainers run by the hundred in every worker: keep their banners out
                from ppgbench_pl.benchmark.console import quiet_lightning

                quiet_lightning()
                _quiet = True
            suite = suite_for(spec.config, spec.run_dir, spec.parse)
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
                               else ({**run_job(suite.context(jobs[jid]), jobs[jid].regime)[0], **extras[jid]}, True)
                               for jid in jids]
            else:
                ran_records = execute_group(spec.run_dir, jids, make_context, jobs[jids[0]].regime, extras)
            outcomes = _outcomes(spec, list(zip(jids, ran_records, strict=True)), log_wandb=rank == 0)
            after = suite.cache.stats()
            outcomes[0].cache = {k: after[k] - before[k] for k in after}  # the spec's counts, on its first job
        except Exception as exc:  # noqa: BLE001 - the job could not even be set up here; report, never raise
            message = f"{type(exc).__name__}: {exc}".splitlines()[0]
            outcomes = [JobOutcome(jid, "failed", f"{message} (while setting the job up on {worker})") for jid in jids]
    return outcomes[0] if len(outcomes) == 1 else JobOutcome(spec.job_id, "group", members=outcomes)


def _outcomes(spec: JobSpec, finished: list[tuple[str, tuple[dict[str, Any], bool]]],
              log_wandb: bool) -> list[JobOutcome]:
    """One outcome per job of the spec (each logged to W&B as its own run with ``--wandb per-job``)."""
    outcomes = []
    for jid, (record, ran) in finished:
        if ran and log_wandb and spec.wandb == "per-job":
            from ppgbench_pl.benchmark.tracking import log_job_run

            log_job_run(replace(spec, job_id=jid, group=()), record, spec.run_config)
        status = record.get("status", "failed") if ran else "done"
        outcomes.append(JobOutcome(jid, status, record.get("error") if ran else None))
    return outcomes


Finished = tuple[JobSpec, JobOutcome | BaseException]
#: The search progress events' module (its package imports Optuna: looked up, not imported, until needed).
EVENTS = "ppgbench_pl.hpo.search_events"


def serve(fn: Callable[[JobSpec], JobOutcome], conn: Connection, threads: int | None, gpu: int | None,
          forward: bool = False) -> None:
    """A worker's loop: its threads and GPU set, run each spec received, send back its outcome; ``None`` ends it.

    ``forward``: send the searches' epoch events too (the coordinator shows them).
    """
    # Ctrl-C reaches the whole process group: the coordinator alone handles it and stops its workers with SIGTERM,
    # which ends one at once (a forked worker would otherwise run the coordinator's handlers)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if threads is not None:
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(threads)
        threadpool_limits(limits=threads)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True, name="ppgbench-parent").start()
    if forward or EVENTS in sys.modules:  # a forked copy also drops the display it inherited
        from ppgbench_pl.hpo.search_events import listen_only

        listen_only((lambda event: conn.send(("event", event))) if forward else None)
    while True:
        try:
            spec = conn.recv()
        except (EOFError, OSError):  # the coordinator went away
            return
        if spec is None:
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(spec))
        except Exception as exc:  # noqa: BLE001 - sent back as a lost job
            reply = ("error", exc)
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an exception that does not pickle
            conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


class _Worker:
    """One worker process, its pipe and the spec it holds."""

    def __init__(self, context: Any, fn: Callable[[JobSpec], JobOutcome], threads: int | None, forward: bool,
                 gpu: int | None) -> None:
        self.gpu = gpu
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(fn, child, threads, gpu, forward), daemon=True,
                                       name="ppgbench-worker")
        self.process.start()
        child.close()
        self.spec: JobSpec | None = None

    def give(self, spec: JobSpec) -> None:
        self.spec = spec
        self.conn.send(spec)

    def stop(self, now: bool) -> None:
        if not now and self.process.is_alive():
            with suppress(OSError):
                self.conn.send(None)
            self.process.join(5.0)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5.0)
        self.conn.close()


def run_pool(fn: Callable[[JobSpec], JobOutcome], specs: Sequence[JobSpec], workers: int,
             threads: int | None, gpus: list[int] | None, start: str = "spawn") -> Generator[Finished, None, None]:
    """Run ``fn`` on every spec in ``workers`` (``start``: spawn or fork) processes; a dead one loses only its job."""
    context = multiprocessing.get_context(start)
    sys.stdout.flush()  # a forked worker must not print what this process had buffered
    sys.stderr.flush()
    todo = deque(specs)
    events = sys.modules.get(EVENTS)  # not loaded: nobody listens (a linear run never imports Optuna)
    forward = events is not None and events.listening()
    pool = [_Worker(context, fn, threads, forward, gpus[i % len(gpus)] if gpus else None)
            for i in range(min(workers, len(specs)))]
    for worker in pool:
        worker.give(todo.popleft())
    finished = False
    try:
        while any(w.spec is not None for w in pool):
            busy = {w.conn: w for w in pool if w.spec is not None}
            sentinels = {w.process.sentinel: w for w in busy.values()}
            for ready in wait([*busy, *sentinels]):
                worker = busy.get(ready) or sentinels[ready]  # type: ignore[call-overload]
                if worker.spec is None:  # pipe and sentinel of one worker both ready: handled
                    continue
                result = _result(worker)
                if result is None:  # a search's progress, not the end of the job
                    continue
                spec, worker.spec = worker.spec, None
                if isinstance(result, JobLost) and todo:  # the process is gone: a new one takes its place
                    pool[pool.index(worker)] = worker = _Worker(context, fn, threads, forward, worker.gpu)
                if todo and worker.process.is_alive():
                    worker.give(todo.popleft())
                yield spec, result
        finished = True
    finally:
        for worker in pool:  # interrupted (SIGINT/SIGTERM): stop the workers now; their jobs rerun next time
            worker.stop(now=not finished)


def _result(worker: _Worker) -> JobOutcome | BaseException | None:
    """The held job's outcome, its exception, :class:`JobLost` when the worker died holding it, or None (running).

    Search progress events the worker sent on the way are announced here, as the searches' own process would.
    """
    try:
        while worker.conn.poll():
            kind, value = worker.conn.recv()  # ("event", EpochEvent), ("ok", outcome) or ("error", exception)
            if kind != "event":
                return value  # type: ignore[no-any-return]
            from ppgbench_pl.hpo.search_events import announce  # loaded: the coordinator listens

            announce(replace(value, search=hash((worker.process.pid, value.search))))  # ids of one process only
        if worker.process.is_alive():
            return None
    except (EOFError, OSError):
        pass
    worker.process.join(1.0)
    code = worker.process.exitcode
    death = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
    return JobLost(f"process-pool worker pid {worker.process.pid} {death} while running it")
