"""Executors: how job specs reach a worker. Each runs ``fn(spec)`` somewhere and yields the results.

The protocol is one method, :meth:`Executor.run`: job specs in, ``(spec, outcome or exception)`` out
as jobs finish. An exception means the infrastructure lost the job (a killed worker, a failed SLURM
task); failures *inside* a job are already records. Nothing here knows what a job is, so resume and
failure isolation are the same whatever runs the jobs:

* :class:`LocalExecutor`: in the calling process, one after another (the default; debuggable).
* :class:`ProcessExecutor`: a local pool of ``spawn`` processes, torch threads split between them,
  optionally one GPU per worker.
* :class:`SubmititExecutor`: SLURM job arrays (``map_array``, ``slurm_array_parallelism``) through
  submitit; ``cluster: local``/``debug`` run the same path on one machine.
* :class:`DaskExecutor`: a Dask cluster (``Client(address)``), or a local one bound to 127.0.0.1.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ppgbench_pl.benchmark.worker import JobOutcome, JobSpec, init_worker
from ppgbench_pl.errors import ConfigError

JobFunction = Callable[[JobSpec], JobOutcome]
Finished = tuple[JobSpec, JobOutcome | BaseException]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class Executor(ABC):
    """Runs job specs and yields each one's outcome (or the exception that lost it) as it finishes."""

    #: True when the executor starts one process per rank itself (so ``strategy: ddp`` can work).
    launches_ranks: bool = False

    def threads_per_job(self) -> int | None:
        """Torch/BLAS threads each job should use (``None``: leave the process default)."""
        return None

    @abstractmethod
    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Run ``fn`` on every spec; yield ``(spec, outcome or exception)`` in completion order.

        A generator, so that closing it early (an interrupt) stops whatever still runs.
        """


class LocalExecutor(Executor):
    """Every job in the calling process, one after another."""

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Call ``fn`` on each spec in plan order."""
        for spec in specs:
            try:
                result: JobOutcome | BaseException = fn(spec)
            except Exception as exc:  # noqa: BLE001 - reported as a lost job
                result = exc
            yield spec, result


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Temporarily set environment variables (inherited by processes started inside the block)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class ProcessExecutor(Executor):
    """A pool of ``spawn`` worker processes on this machine.

    Args:
        workers: Worker processes.
        threads_per_worker: Torch/BLAS threads per worker (default: CPU cores // workers, at least 1).
        gpus: GPU ids handed out one per worker (round robin); each worker then sees only its GPU, so
            set ``trainer.devices: 1``.
    """

    def __init__(self, workers: int = 2, threads_per_worker: int | None = None, gpus: list[int] | None = None) -> None:
        if workers < 1:
            raise ConfigError(f"executor.workers must be at least 1, got {workers}")
        self.workers, self.threads_per_worker, self.gpus = workers, threads_per_worker, gpus

    def threads_per_job(self) -> int:
        """Cores split evenly between workers."""
        return self.threads_per_worker or max(1, (os.cpu_count() or 1) // self.workers)

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Submit everything to the pool; yield as workers finish. A dead worker loses only its jobs."""
        import multiprocessing
        from concurrent.futures import Future, ProcessPoolExecutor, as_completed

        if not specs:
            return
        context = multiprocessing.get_context("spawn")
        queue = None
        if self.gpus:
            queue = context.Queue()
            for i in range(self.workers):
                queue.put(self.gpus[i % len(self.gpus)])
        threads = self.threads_per_job()
        with _environment({k: str(threads) for k in THREAD_VARIABLES}):
            pool = ProcessPoolExecutor(max_workers=min(self.workers, len(specs)), mp_context=context,
                                       initializer=init_worker, initargs=(threads, queue))
            futures: dict[Future[JobOutcome], JobSpec] = {pool.submit(fn, spec): spec for spec in specs}
        finished = False
        try:
            for future in as_completed(futures):
                try:
                    result: JobOutcome | BaseException = future.result()
                except Exception as exc:  # noqa: BLE001 - e.g. BrokenProcessPool: the job was lost
                    result = exc
                yield futures[future], result
            finished = True
        finally:
            if not finished:  # interrupted (SIGINT/SIGTERM): stop the workers now; their jobs rerun next time
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
            pool.shutdown(wait=finished, cancel_futures=True)


def run_chunk(fn: JobFunction, specs: list[JobSpec]) -> list[JobOutcome]:
    """Several jobs in one cluster task (saves start-up time for short jobs)."""
    return [fn(spec) for spec in specs]


class SubmititExecutor(Executor):
    """SLURM job arrays through submitit (or its ``local``/``debug`` executors on one machine).

    Args:
        cluster: ``None`` (SLURM when available, else local), ``slurm``, ``local`` or ``debug``.
        folder: submitit's log and pickle folder (default: ``<run_dir>/submitit``).
        parallelism: Array tasks running at once (``slurm_array_parallelism``).
        jobs_per_task: Jobs run one after another in each array task.
        parameters: Passed to ``update_parameters`` (``timeout_min``, ``slurm_partition``,
            ``gpus_per_node``, ``tasks_per_node``, ``cpus_per_task``, ``mem_gb``, ...).
        poll_s: Seconds between status checks.
    """

    launches_ranks = True

    def __init__(self, cluster: str | None = None, folder: str | None = None, parallelism: int = 64,
                 jobs_per_task: int = 1, parameters: dict[str, Any] | None = None, poll_s: float = 5.0) -> None:
        if jobs_per_task < 1:
            raise ConfigError(f"executor.jobs_per_task must be at least 1, got {jobs_per_task}")
        if parallelism < 1:
            raise ConfigError(f"executor.parallelism must be at least 1, got {parallelism}")
        self.cluster, self.folder, self.parallelism = cluster, folder, parallelism
        self.jobs_per_task, self.parameters, self.poll_s = jobs_per_task, dict(parameters or {}), poll_s

    def threads_per_job(self) -> int | None:
        """``cpus_per_task`` when given (SLURM does not set torch's thread count)."""
        cpus = self.parameters.get("cpus_per_task") or self.parameters.get("slurm_cpus_per_task")
        return int(cpus) if cpus else None

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """One array task per chunk of ``jobs_per_task`` specs; yield as tasks finish."""
        import submitit

        if not specs:
            return
        executor = submitit.AutoExecutor(folder=self.folder or str(Path(run_dir) / "submitit"), cluster=self.cluster)
        executor.update_parameters(slurm_array_parallelism=self.parallelism, **self.parameters)
        chunks = [list(specs[i:i + self.jobs_per_task]) for i in range(0, len(specs), self.jobs_per_task)]
        jobs = executor.map_array(run_chunk, [fn] * len(chunks), chunks)
        pending = dict(zip(jobs, range(len(chunks)), strict=True))
        try:
            while pending:
                finished = [job for job in pending if job.done()]
                for job in finished:
                    chunk = chunks[pending.pop(job)]
                    try:
                        outcomes: list[JobOutcome] | BaseException = job.result()
                    except Exception as exc:  # noqa: BLE001 - the task died or was cancelled
                        outcomes = exc
                    for i, spec in enumerate(chunk):
                        yield spec, outcomes if isinstance(outcomes, BaseException) else outcomes[i]
                if not finished:
                    time.sleep(self.poll_s)
        finally:
            for job in pending:  # interrupted: stop what has not run (finished records stay)
                job.cancel(check=False)


class DaskExecutor(Executor):
    """A Dask cluster: ``address`` of a running scheduler, or a local cluster on 127.0.0.1.

    Args:
        address: Scheduler address (``tcp://host:8786``); ``None`` starts a local cluster.
        workers: Workers of the local cluster.
        threads_per_worker: Threads per local worker (jobs are CPU heavy: 1 is best).
        processes: Local workers as processes (``False``: threads of this process; for tests).
    """

    def __init__(self, address: str | None = None, workers: int = 2, threads_per_worker: int = 1,
                 processes: bool = True) -> None:
        if workers < 1 or threads_per_worker < 1:
            raise ConfigError(f"executor.workers and threads_per_worker must be at least 1, got {workers}, "
                              f"{threads_per_worker}")
        self.address, self.workers = address, workers
        self.threads_per_worker, self.processes = threads_per_worker, processes

    def threads_per_job(self) -> int | None:
        """Local cluster: cores split evenly between workers; remote: leave each worker's default."""
        if self.address is not None:
            return None
        return max(1, (os.cpu_count() or 1) // (self.workers * self.threads_per_worker))

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Map over the cluster; yield as futures complete."""
        from dask.distributed import Client, LocalCluster, as_completed

        if not specs:
            return
        cluster = None
        if self.address is None:  # loopback only; thread workers talk in-process (no socket at all)
            network = {"host": "127.0.0.1"} if self.processes else {}
            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=self.threads_per_worker,
                                   processes=self.processes, dashboard_address=None, **network)
            client = Client(cluster)
        else:
            client = Client(self.address)
        try:
            keys = [f"ppgbench-{spec.job_id}" for spec in specs]
            futures = client.map(fn, list(specs), key=keys, pure=False)
            by_key = dict(zip(keys, specs, strict=True))
            for future in as_completed(futures):
                try:
                    result: JobOutcome | BaseException = future.result()
                except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the job was lost
                    result = exc
                yield by_key[future.key], result
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
