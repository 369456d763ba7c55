"""SLURM and Dask checks and wait loops: a job that can no longer finish comes back as :class:`JobLost`."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Generator, Iterable, Sequence
from contextlib import suppress
from typing import Any

import yaml

from ppgbench_pl.benchmark.worker import Finished, JobLost, JobOutcome, JobSpec
from ppgbench_pl.errors import ConfigError

QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESIZING", "SUSPENDED"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}
#: The submitit SLURM parameters worth a ``--test-only`` (as ``--gpus-per-node``...); the rest cannot be refused.
SBATCH_PARAMETERS = ("partition", "time", "gpus_per_node", "gpus_per_task", "gres", "cpus_per_task", "mem", "account",
                     "qos", "constraint", "nodes", "ntasks_per_node", "exclude")
#: The user's name of each parameter (the executor's ``parameters``), for the one-line refusal.
USER_NAMES = {"partition": "slurm_partition", "time": "timeout_min", "gpus_per_node": "gpus_per_node",
              "mem": "mem_gb", "cpus_per_task": "cpus_per_task", "nodes": "nodes",
              "ntasks_per_node": "tasks_per_node"}
#: Words of sbatch's refusal -> the parameter it refused.
BLAME = (("partition", "partition"), ("account", "account"), ("qos", "qos"), ("gres", "gres"),
         ("gpu", "gpus_per_node"), ("memory", "mem"), ("time limit", "time"), ("cpu", "cpus_per_task"),
         ("constraint", "constraint"), ("feature", "constraint"), ("node", "nodes"))


def flow_parameters(parameters: Any) -> dict[str, Any]:
    """The parameters as a dict; ``{a:1,b:x}`` (no space after the colons) reads as ``{a: 1, b: x}``."""
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        parameters = yaml.safe_load(parameters) if parameters.strip() else {}
    if not isinstance(parameters, dict):
        raise ConfigError(f"executor.init_args.parameters must be a mapping such as '{{timeout_min: 10, "
                          f"slurm_partition: debug}}', got {parameters!r}")
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        key = str(key)
        if value is None and ":" in key:  # YAML reads {a:1} as the key 'a:1' with no value
            key, _, raw = key.partition(":")
            loaded = yaml.safe_load(raw) if raw.strip() else None
            value = raw.strip() if ":" in raw else loaded  # 1:00:00 is a SLURM time, not base 60
        out[key.strip()] = value
    return out


def check_sbatch(slurm_parameters: dict[str, Any], timeout_s: float) -> None:
    """``sbatch --test-only`` with the resolved partition and resources; one line naming what it refused."""
    flags = [f"--{name.replace('_', '-')}={slurm_parameters[name]}" for name in SBATCH_PARAMETERS
             if slurm_parameters.get(name) not in (None, "")]
    try:
        done = subprocess.run(["sbatch", "--test-only", *flags, "--wrap", "true"], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"executor submitit: sbatch --test-only did not answer within {timeout_s:g} s; "
                          "is the SLURM controller up?") from None
    except OSError as exc:
        raise ConfigError(f"executor submitit: sbatch cannot be run ({exc.strerror or exc})") from None
    if done.returncode == 0:
        return
    said = " ".join((done.stderr or done.stdout or "").split()) or f"exit status {done.returncode}"
    lowered = said.lower()
    if "unable to contact" in lowered or "connect failure" in lowered:
        raise ConfigError(f"executor submitit: sbatch --test-only could not reach the SLURM controller ({said})")
    blamed = next((name for word, name in BLAME if word in lowered and name in slurm_parameters), None)
    setting = (f"{USER_NAMES.get(blamed, 'slurm_' + blamed)}={slurm_parameters[blamed]}" if blamed
               else " ".join(flags) or "(defaults)")
    raise ConfigError(f"executor.init_args.parameters {setting}: sbatch --test-only refused it ({said})")


def _run(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (subprocess.TimeoutExpired, OSError):
        return None


def query_states(array_ids: Iterable[str], timeout_s: float) -> dict[str, str] | None:
    """Task id (``123_4``) -> SLURM state from squeue, then sacct (``None``: the controller did not answer)."""
    ids = ",".join(sorted(set(array_ids)))
    if not ids:
        return {}
    states: dict[str, str] = {}
    done = _run(["squeue", "-h", "-r", "--states=all", "-o", "%i %T", "-j", ids], timeout_s)
    if done is None or (done.returncode != 0 and "invalid job id" not in done.stderr.lower()):
        return None
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            states[parts[0]] = parts[1].upper()
    accounted = _run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ids], timeout_s)
    if accounted is not None and accounted.returncode == 0:  # without accounting sacct fails: squeue alone
        for line in accounted.stdout.splitlines():
            task, _, state = line.partition("|")
            if task and state and task not in states:
                states[task.strip()] = state.split()[0].upper()
    return states


class SlurmWatch:
    """The SLURM state of array tasks, checked at most every ``check_s``; says which can no longer deliver a result."""

    def __init__(self, check_s: float = 30.0, controller_timeout_s: float = 600.0) -> None:
        self.check_s, self.controller_timeout_s = check_s, controller_timeout_s
        self.states: dict[str, str] = {}
        self.last_check, self.last_answer = float("-inf"), time.monotonic()
        self.suspect: set[str] = set()  # ended without a result at the last check: lost if still so at the next

    def counts(self, task_ids: Iterable[str]) -> tuple[int, int]:
        """(queued, running) among ``task_ids`` at the last check (unknown ones count as queued)."""
        states = [self.states.get(t, "PENDING") for t in task_ids]
        running = sum(s in RUNNING for s in states)
        return len(states) - running, running

    def lost(self, task_ids: list[str]) -> dict[str, str]:
        """Task id -> why it can no longer finish, for those of ``task_ids`` (all without a result yet)."""
        now = time.monotonic()
        if not task_ids or now - self.last_check < self.check_s:
            return {}
        self.last_check = now
        states = query_states({t.split("_", 1)[0] for t in task_ids}, min(20.0, self.controller_timeout_s))
        if states is None:
            silent = now - self.last_answer
            if silent >= self.controller_timeout_s:
                return {t: f"SLURM task {t}: the controller has not answered for {silent:.0f} s; once it is back, "
                           f"scancel {t.split('_', 1)[0]} or the task may still run" for t in task_ids}
            return {}
        self.last_answer = now
        self.states.update(states)
        ended = {t: states.get(t) for t in task_ids if states.get(t) not in QUEUED | RUNNING}
        verdict = {t: f"SLURM task {t} ended {state} without a result" if state
                   else f"SLURM task {t} is no longer known to squeue or sacct"
                   for t, state in ended.items() if t in self.suspect}  # twice in a row: no result still on its way
        self.suspect = set(ended) - set(verdict)
        if self.suspect:  # look again soon rather than a whole period later
            self.last_check = now - self.check_s + min(self.check_s, 2.0)
        return verdict


def progress_line(engine: str, queued: int, running: int, done: int, total: int, unit: str) -> None:
    """``submitit: 12 queued, 2 running, 2 done of 16 array tasks`` on stderr."""
    print(f"{engine}: {queued} queued, {running} running, {done} done of {total} {unit}", file=sys.stderr,
          flush=True)


def _collect(job: Any, chunk: list[JobSpec]) -> list[Finished]:
    try:
        outcomes: list[JobOutcome] = job.result()
    except Exception as exc:  # noqa: BLE001 - the task died or was cancelled
        lost = JobLost(f"SLURM task {job.job_id}: {type(exc).__name__}: {exc}".splitlines()[0])
        return [(spec, lost) for spec in chunk]
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
        with suppress(Exception):  # a state that cannot be read counts as queued
            running += str(job.state).upper() == "RUNNING"
    return len(jobs) - running, running


def wait_tasks(jobs: Sequence[Any], chunks: Sequence[list[JobSpec]], watch: SlurmWatch | None, poll_s: float,
               progress_s: float) -> Generator[Finished, None, None]:
    """Yield each submitit task's specs with their outcomes as tasks finish, or :class:`JobLost` as found lost."""
    pending = dict(zip(jobs, chunks, strict=True))
    last_progress, total = time.monotonic(), len(chunks)
    try:
        while pending:
            finished = [job for job in pending if job.done()]
            for job in finished:
                yield from _collect(job, pending.pop(job))
            if watch is not None and pending:
                lost = watch.lost([str(job.job_id) for job in pending])
                for job in [j for j in pending if str(j.job_id) in lost]:
                    chunk = pending.pop(job)
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
    """What the Dask client says about its scheduler and workers, checked every poll."""

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


def wait_futures(futures: Sequence[Any], specs: Sequence[JobSpec], watch: DaskWatch, poll_s: float,
                 progress_s: float) -> Generator[Finished, None, None]:
    """Yield each future's spec and outcome as it completes, or :class:`JobLost` for all when none can."""
    from dask.distributed import wait

    pending = dict(zip(futures, specs, strict=True))
    last_progress, total = time.monotonic(), len(futures)
    while pending:
        try:
            done = wait(list(pending), timeout=poll_s, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            done = set()
        except Exception:  # noqa: BLE001 - futures cancelled when the client lost its scheduler
            done = {f for f in pending if f.done()}
        for future in done:
            spec = pending.pop(future)
            if future.cancelled():  # we cancel nothing while waiting: Dask did, on losing the scheduler
                yield spec, JobLost(f"Dask cancelled it: the client lost the scheduler at {watch.address}")
                continue
            try:
                outcome: JobOutcome | BaseException = future.result()
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the job was lost
                outcome = JobLost(f"Dask: {type(exc).__name__}: {exc}".splitlines()[0])
            yield spec, outcome
        if not pending:
            return
        reason = watch.lost_reason()
        if reason is not None:
            for spec in pending.values():
                yield spec, JobLost(reason)
            return
        if time.monotonic() - last_progress >= progress_s:
            progress_line("dask", *watch.counts(len(pending)), total - len(pending), total, "jobs")
            last_progress = time.monotonic()
