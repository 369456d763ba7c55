"""The cluster executors' wait loops (submitit: :func:`wait_tasks`; Dask: :func:`wait_futures`).

Never a silent wait: jobs that can no longer finish come back as :class:`JobLost`, and a progress line
(queued, running, done) is printed every ``progress_s``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Sequence
from typing import Any

from ppgbench_pl.benchmark.pool import Finished
from ppgbench_pl.benchmark.slurm_watch import SlurmWatch
from ppgbench_pl.benchmark.worker import JobLost, JobOutcome, JobSpec


def progress_line(engine: str, queued: int, running: int, done: int, total: int, unit: str) -> None:
    """``submitit: 12 queued, 2 running, 2 done of 16 array tasks`` on stderr."""
    print(f"{engine}: {queued} queued, {running} running, {done} done of {total} {unit}", file=sys.stderr,
          flush=True)


def _collect(job: Any, chunk: list[JobSpec]) -> list[Finished]:
    try:
        outcomes: list[JobOutcome] | BaseException = job.result()
    except Exception as exc:  # noqa: BLE001 - the task died or was cancelled
        outcomes = JobLost(f"SLURM task {job.job_id}: {type(exc).__name__}: {exc}".splitlines()[0])
    if isinstance(outcomes, BaseException):
        return [(spec, outcomes) for spec in chunk]
    return list(zip(chunk, outcomes, strict=True))


def _cancel(job: Any) -> None:
    """Cancel a task (scancel), whatever the controller says (it may be the thing that is down)."""
    try:
        job.cancel(check=False)
    except Exception as exc:  # noqa: BLE001 - scancel missing or failing: the task is reported lost anyway
        print(f"submitit: could not cancel task {job.job_id} ({type(exc).__name__}: {exc})".splitlines()[0],
              file=sys.stderr)


def _local_counts(jobs: Sequence[Any]) -> tuple[int, int]:
    """(queued, running) from submitit's own states (its local and debug executors)."""
    running = 0
    for job in jobs:
        try:
            running += str(job.state).upper() == "RUNNING"
        except Exception:  # noqa: BLE001, S112 - a state that cannot be read counts as queued
            continue
    return len(jobs) - running, running


def wait_tasks(jobs: Sequence[Any], chunks: Sequence[list[JobSpec]], watch: SlurmWatch | None, poll_s: float,
               progress_s: float) -> Generator[Finished, None, None]:
    """Yield each task's specs with their outcomes as tasks finish, or :class:`JobLost` as they are found lost.

    ``jobs``: submitit jobs (or stand-ins with ``job_id``, ``done()``, ``result()``, ``cancel`` and ``state``).
    """
    pending = dict(zip(jobs, range(len(chunks)), strict=True))
    last_progress, total = time.monotonic(), len(chunks)
    try:
        while pending:
            finished = [job for job in pending if job.done()]
            for job in finished:
                yield from _collect(job, chunks[pending.pop(job)])
            if watch is not None and pending:
                lost = watch.lost([str(job.job_id) for job in pending])
                for job in [j for j in pending if str(j.job_id) in lost]:
                    chunk = chunks[pending.pop(job)]
                    if job.done():  # its result landed meanwhile
                        yield from _collect(job, chunk)
                        continue
                    _cancel(job)
                    yield from ((spec, JobLost(lost[str(job.job_id)])) for spec in chunk)
            if pending and time.monotonic() - last_progress >= progress_s:
                queued, running = (watch.counts(str(j.job_id) for j in pending) if watch is not None
                                   else _local_counts(list(pending)))
                progress_line("submitit", queued, running, total - len(pending), total, "array tasks")
                last_progress = time.monotonic()
            if pending and not finished:
                time.sleep(poll_s)
    finally:
        for job in pending:  # interrupted: stop what has not run (finished records stay)
            _cancel(job)


class DaskWatch:
    """What the Dask client says about its scheduler and workers, checked every poll.

    Args:
        scheduler_timeout_s: Seconds the scheduler may stay unreachable before every pending job is lost.
        worker_timeout_s: Seconds with no worker at all before every pending job is lost.
    """

    def __init__(self, client: Any, address: str, scheduler_timeout_s: float, worker_timeout_s: float) -> None:
        self.client, self.address = client, address
        self.scheduler_timeout_s, self.worker_timeout_s = scheduler_timeout_s, worker_timeout_s
        self.scheduler_seen = self.worker_seen = time.monotonic()
        self.workers: set[str] = set(self._workers() or ())

    def _workers(self) -> set[str] | None:
        if self.client.status != "running":
            return None
        try:
            return set(self.client.scheduler_info(n_workers=-1).get("workers", {}))
        except Exception:  # noqa: BLE001 - the scheduler went away between the status and the call
            return None

    def lost_reason(self) -> str | None:
        """Why no pending job can finish now (``None``: they still can); says when a worker leaves."""
        now, workers = time.monotonic(), self._workers()
        if workers is None:
            silent = now - self.scheduler_seen
            if silent >= self.scheduler_timeout_s:
                return f"the Dask scheduler at {self.address} has not answered for {silent:.0f} s"
            return None
        self.scheduler_seen = now
        for gone in sorted(self.workers - workers):
            print(f"dask: worker {gone} left; Dask runs its jobs again on another worker", file=sys.stderr,
                  flush=True)
        self.workers = workers
        if workers:
            self.worker_seen = now
        elif now - self.worker_seen >= self.worker_timeout_s:
            return f"no Dask worker at {self.address} for {now - self.worker_seen:.0f} s"
        return None

    def counts(self, pending: int) -> tuple[int, int]:
        """(queued, running) among ``pending`` futures (running: one per worker thread at most)."""
        try:
            threads = sum(self.client.nthreads().values())
        except Exception:  # noqa: BLE001 - no scheduler: nothing runs
            threads = 0
        running = min(pending, threads)
        return pending - running, running


def _future_result(future: Any, address: str) -> JobOutcome | BaseException:
    if future.cancelled():  # we cancel nothing while waiting: Dask did, on losing the scheduler
        return JobLost(f"Dask cancelled it: the client lost the scheduler at {address}")
    try:
        return future.result()  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the job was lost
        return JobLost(f"Dask: {type(exc).__name__}: {exc}".splitlines()[0])


def wait_futures(futures: Sequence[Any], specs: Sequence[JobSpec], watch: DaskWatch, poll_s: float,
                 progress_s: float) -> Generator[Finished, None, None]:
    """Yield each future's spec and outcome as it completes, or :class:`JobLost` for all when none can."""
    from dask.distributed import wait

    by_key = {f.key: spec for f, spec in zip(futures, specs, strict=True)}
    pending = set(futures)
    last_progress, total = time.monotonic(), len(futures)
    while pending:
        try:
            done = wait(list(pending), timeout=poll_s, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            done = set()
        except Exception:  # noqa: BLE001 - futures cancelled when the client lost its scheduler
            done = {f for f in pending if f.done()}
        for future in done:
            pending.discard(future)
            yield by_key[future.key], _future_result(future, watch.address)
        if not pending:
            return
        reason = watch.lost_reason()
        if reason is not None:
            for future in pending:
                yield by_key[future.key], JobLost(reason)
            return
        if time.monotonic() - last_progress >= progress_s:
            progress_line("dask", *watch.counts(len(pending)), total - len(pending), total, "jobs")
            last_progress = time.monotonic()
