"""Executors: each runs ``fn(spec)`` somewhere and yields ``(spec, outcome or exception)`` as jobs finish."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ppgbench_pl.benchmark.clusters import (
    DaskWatch,
    SlurmWatch,
    check_sbatch,
    flow_parameters,
    wait_futures,
    wait_tasks,
)
from ppgbench_pl.benchmark.thread_policy import usable_cores
from ppgbench_pl.benchmark.worker import Finished, JobLost, JobOutcome, JobSpec, run_pool
from ppgbench_pl.errors import ConfigError

JobFunction = Callable[[JobSpec], JobOutcome]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class Executor(ABC):
    """Runs job specs and yields each one's outcome (or the exception that lost it) as it finishes."""

    #: True when the executor starts one process per rank itself (so ``strategy: ddp`` can work).
    launches_ranks: bool = False

    def threads_per_job(self) -> int | None:
        """Torch/BLAS threads each job should use (``None``: leave the process default)."""
        return None

    def processes_here(self) -> int | None:
        """Job processes run side by side on this machine (``None``: elsewhere, a cluster's)."""
        return None

    def check(self) -> None:
        """Refuse settings that cannot work (a partition SLURM refuses), in one line, before any work."""
        return None

    @abstractmethod
    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Yield ``(spec, outcome or exception)`` in completion order (closing it early stops what still runs)."""


class LocalExecutor(Executor):
    """Jobs on this machine: those that train networks side by side in ``fork``-ed copies of this process.

    Trial stacks and finetuning run one job process per usable core (a forked copy starts with this process's
    imports and parsed run; a spawned one pays Lightning's import again, about 5 s CPU). Linear, label-efficiency
    and RF jobs run here, one after another: a linear job costs milliseconds, less than a process, and the
    forest's trees already use every core. A job process runs at one thread: GNU OpenMP hangs a child forked
    after this process used several threads (the embedding pass) as soon as the child starts threads itself.

    Args:
        workers: Job processes for the jobs that train networks (default: one per usable core, or 1 where
            jobs cannot fork: not Linux, a GPU visible, CUDA initialised; a ``workers`` above 1 there is
            refused). 1 runs every job in this process (a stateful callback object then sees every job).
    """

    #: Only jobs that train networks run in the job processes (``ThreadPolicy.side_by_side``).
    pools_networks_only = True

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ConfigError(f"executor.workers must be at least 1, got {workers}")
        self.workers = workers

    def processes_here(self) -> int:
        """The job processes: ``workers`` (``ConfigError`` above 1 where jobs cannot fork), else the usable cores."""
        why = fork_refusal()
        if self.workers is None:
            return usable_cores() if why is None else 1
        if self.workers > 1 and why is not None:
            raise ConfigError(f"executor.workers {self.workers}: jobs cannot run in forked copies of this process "
                              f"here ({why}); use --executor process, or workers: 1")
        return self.workers

    def threads_per_job(self) -> int | None:
        """One in a job process (see the class); ``None`` with one process: its default."""
        return None if self.processes_here() == 1 else 1

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Jobs that train networks at one thread in a forked pool (when there are several); the rest here, first."""
        processes = self.processes_here()
        pooled = [s for s in specs if s.side_by_side and (s.threads or 1) == 1]  # --threads 2: all of them here
        if processes < 2 or len(pooled) < 2:
            pooled = []
        for spec in (s for s in specs if not (s.side_by_side and pooled)):
            try:
                result: JobOutcome | BaseException = fn(spec)
            except Exception as exc:  # noqa: BLE001 - reported as a lost job
                result = exc
            yield spec, result
        if pooled:
            yield from run_pool(fn, pooled, processes, 1, None, start="fork")


def fork_refusal() -> str | None:
    """Why jobs cannot run in forked copies of this process, else None."""
    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return "fork is not safe here (not Linux)"
    import torch  # a run imports it anyway (Lightning); the answer must not depend on when this is asked

    if torch.cuda.is_initialized():
        return "CUDA is initialised in this process (a forked copy cannot use it)"
    if torch.cuda.device_count() > 0:  # NVML: does not initialise CUDA (is_available may, before the fork)
        return "a GPU is visible (its jobs run in one process; --executor process --executor.gpus for several)"
    return None


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
    """A pool of ``spawn`` worker processes on this machine, one job per worker at a time.

    Args:
        workers: Worker processes (default: one per usable core, or one per GPU when ``gpus`` are given;
            each worker holds its own copy of the suite's data).
        threads_per_worker: Torch/BLAS threads per worker for encoder work (default: cores // workers, at
            least 1); probe jobs run at one thread (``benchmark/thread_policy.py``).
        gpus: GPU ids handed out one per worker (round robin); each worker then sees only its GPU, so
            set ``trainer.devices: 1``.
    """

    def __init__(self, workers: int | None = None, threads_per_worker: int | None = None,
                 gpus: list[int] | None = None) -> None:
        if workers is None:
            workers = len(gpus) if gpus else usable_cores()
        if workers < 1:
            raise ConfigError(f"executor.workers must be at least 1, got {workers}")
        self.workers, self.threads_per_worker, self.gpus = workers, threads_per_worker, gpus

    def threads_per_job(self) -> int:
        """Cores split evenly between workers."""
        return self.threads_per_worker or max(1, usable_cores() // self.workers)

    def processes_here(self) -> int:
        """The workers."""
        return self.workers

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """One job per worker at a time; yield as workers finish. A dead worker loses only the job it held."""
        threads = self.threads_per_job()
        with _environment({k: str(threads) for k in THREAD_VARIABLES}):  # inherited by every worker started
            yield from run_pool(fn, specs, self.workers, threads, self.gpus)


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
            ``gpus_per_node``, ``tasks_per_node``, ``cpus_per_task``, ``mem_gb``, ...); either YAML flow
            form (``{timeout_min: 10}`` or ``{timeout_min:10}``).
        poll_s: Seconds between looks for finished tasks.
        check_s: Seconds between squeue/sacct checks for tasks that ended without a result (SLURM).
        controller_timeout_s: Seconds the SLURM controller may stay silent before every pending task
            is reported lost.
        progress_s: Seconds between progress lines (queued, running, done) on stderr.
    """

    launches_ranks = True

    def __init__(self, cluster: str | None = None, folder: str | None = None, parallelism: int = 64,
                 jobs_per_task: int = 1, parameters: dict[str, Any] | str | None = None, poll_s: float = 5.0,
                 check_s: float = 30.0, controller_timeout_s: float = 600.0, progress_s: float = 60.0) -> None:
        if jobs_per_task < 1:
            raise ConfigError(f"executor.jobs_per_task must be at least 1, got {jobs_per_task}")
        if parallelism < 1:
            raise ConfigError(f"executor.parallelism must be at least 1, got {parallelism}")
        self.cluster, self.folder, self.parallelism = cluster, folder, parallelism
        self.jobs_per_task, self.parameters, self.poll_s = jobs_per_task, flow_parameters(parameters), poll_s
        self.check_s, self.controller_timeout_s, self.progress_s = check_s, controller_timeout_s, progress_s

    def threads_per_job(self) -> int | None:
        """``cpus_per_task`` when given (SLURM does not set torch's thread count)."""
        cpus = self.parameters.get("cpus_per_task") or self.parameters.get("slurm_cpus_per_task")
        return int(cpus) if cpus else None

    def _executor(self, folder: Path) -> Any:
        """The submitit executor with the parameters applied (its own check); one line naming a bad one."""
        import submitit

        if self.cluster == "slurm" and (missing := [c for c in ("sbatch", "srun") if shutil.which(c) is None]):
            raise ConfigError(f"executor.init_args.cluster slurm: {' and '.join(missing)} not installed here (SLURM's "
                              "client commands are needed; 'cluster: local' runs the same path on this machine)")
        try:
            executor = submitit.AutoExecutor(folder=str(folder), cluster=self.cluster)
            executor.update_parameters(slurm_array_parallelism=self.parallelism, **self.parameters)
        except (ValueError, NameError, AssertionError, TypeError, RuntimeError) as exc:
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"executor.init_args.parameters {self.parameters}: submitit refused them ({said})"
                              ) from None
        return executor

    def check(self) -> None:
        """Submitit's parameter check, and on SLURM ``sbatch --test-only`` with the partition and resources."""
        with tempfile.TemporaryDirectory(prefix="ppgbench-check-") as scratch:  # submitit makes its folder
            executor = self._executor(Path(scratch) / "submitit")
        if executor.cluster == "slurm":
            check_sbatch(dict(executor.parameters), 30.0)

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """One array task per chunk of ``jobs_per_task`` specs; yield as tasks finish or are found lost."""
        if not specs:
            return
        executor = self._executor(Path(self.folder or Path(run_dir) / "submitit"))
        chunks = [list(specs[i:i + self.jobs_per_task]) for i in range(0, len(specs), self.jobs_per_task)]
        jobs = executor.map_array(run_chunk, [fn] * len(chunks), chunks)
        watch = SlurmWatch(self.check_s, self.controller_timeout_s) if executor.cluster == "slurm" else None
        yield from wait_tasks(jobs, chunks, watch, self.poll_s, self.progress_s)


class DaskExecutor(Executor):
    """A Dask cluster: ``address`` of a running scheduler, or a local cluster on 127.0.0.1.

    Args:
        address: Scheduler address (``tcp://host:8786``); ``None`` starts a local cluster.
        workers: Workers of the local cluster.
        threads_per_worker: Threads per local worker (jobs are CPU heavy: 1 is best).
        processes: Local workers as processes (``False``: threads of this process; for tests).
        connect_timeout_s: Seconds the scheduler at ``address`` has to answer before the run is refused.
        poll_s: Seconds between checks of the scheduler and its workers while jobs run.
        scheduler_timeout_s: Seconds the scheduler may stay unreachable before every pending job is lost.
        worker_timeout_s: Seconds with no worker before every pending job is lost.
        progress_s: Seconds between progress lines (queued, running, done) on stderr.
    """

    def __init__(self, address: str | None = None, workers: int = 2, threads_per_worker: int = 1,
                 processes: bool = True, connect_timeout_s: float = 5.0, poll_s: float = 2.0,
                 scheduler_timeout_s: float = 120.0, worker_timeout_s: float = 600.0,
                 progress_s: float = 60.0) -> None:
        if workers < 1 or threads_per_worker < 1:
            raise ConfigError(f"executor.workers and threads_per_worker must be at least 1, got {workers}, "
                              f"{threads_per_worker}")
        self.address, self.workers = address, workers
        self.threads_per_worker, self.processes = threads_per_worker, processes
        self.connect_timeout_s, self.poll_s, self.progress_s = connect_timeout_s, poll_s, progress_s
        self.scheduler_timeout_s, self.worker_timeout_s = scheduler_timeout_s, worker_timeout_s

    def threads_per_job(self) -> int | None:
        """Local cluster: cores split evenly between workers; remote: leave each worker's default."""
        if self.address is not None:
            return None
        return max(1, (os.cpu_count() or 1) // (self.workers * self.threads_per_worker))

    def processes_here(self) -> int | None:
        """The local cluster's workers (``None`` for a remote scheduler)."""
        return None if self.address is not None else self.workers

    def check(self) -> None:
        """The scheduler at ``address`` accepts a connection within ``connect_timeout_s``."""
        if self.address is None:
            return
        parts = urlsplit(self.address if "://" in self.address else f"tcp://{self.address}")
        if parts.scheme not in ("tcp", "tls"):
            return  # ucx, inproc: Dask's own connect says what is wrong
        try:
            host, port = parts.hostname, parts.port or 8786
        except ValueError:
            raise ConfigError(f"executor.init_args.address {self.address}: not a host:port address") from None
        try:
            socket.create_connection((host or "127.0.0.1", port), timeout=self.connect_timeout_s).close()
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            raise ConfigError(f"executor.init_args.address {self.address}: no Dask scheduler answers there "
                              f"within {self.connect_timeout_s:g} s ({why.lower()})") from None

    def run(self, fn: JobFunction, specs: Sequence[JobSpec], run_dir: Path) -> Generator[Finished, None, None]:
        """Map over the cluster; yield as futures complete, or as lost when the cluster cannot finish them."""
        from dask.distributed import Client, LocalCluster

        if not specs:
            return
        cluster = None
        if self.address is None:  # loopback only; thread workers talk in-process (no socket at all)
            network = {"host": "127.0.0.1"} if self.processes else {}
            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=self.threads_per_worker,
                                   processes=self.processes, dashboard_address=None, **network)
            client = Client(cluster)
        else:
            try:
                client = Client(self.address, timeout=self.connect_timeout_s)
            except OSError as exc:  # it answered the check, then went away
                lost = JobLost(f"the Dask scheduler at {self.address} did not answer ({exc})".splitlines()[0])
                yield from ((spec, lost) for spec in specs)
                return
        try:
            # one task group: Dask queues it, so a worker holds only the jobs it runs (a dead one loses only those)
            keys = [("ppgbench-job", spec.job_id) for spec in specs]
            futures = client.map(fn, list(specs), key=keys, pure=False)
            watch = DaskWatch(client, self.address or "the local cluster", self.scheduler_timeout_s,
                              self.worker_timeout_s)
            yield from wait_futures(futures, specs, watch, self.poll_s, self.progress_s)
        finally:
            client.close(timeout=self.connect_timeout_s)
            if cluster is not None:
                cluster.close()
