"""SLURM settings checked before work (:func:`check_sbatch`), and a watch on array tasks (:class:`SlurmWatch`).

The watch asks ``squeue`` and then ``sacct`` for tasks without a result: one that ended without a result,
or that neither knows any more, is lost once two checks in a row agree; a controller silent for
``controller_timeout_s`` loses every pending task.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable
from typing import Any

import yaml

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


def sbatch_missing(cluster: str | None) -> str | None:
    """Why SLURM cannot be used here (``None``: sbatch and srun are installed)."""
    missing = [c for c in ("sbatch", "srun") if shutil.which(c) is None]
    if not missing:
        return None
    return (f"executor.init_args.cluster {cluster or 'slurm'}: {' and '.join(missing)} not installed here "
            "(SLURM's client commands are needed; 'cluster: local' runs the same path on this machine)")


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
    """Task id (``123_4``) -> SLURM state, from squeue, then sacct for what squeue forgot.

    ``None``: the controller did not answer (squeue failed for another reason than unknown job ids).
    """
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
    """Tracks the SLURM state of array tasks; says which can no longer deliver a result.

    Args:
        check_s: Least seconds between two squeue/sacct checks (``command_timeout_s``: the most one may take).
        controller_timeout_s: Seconds without an answer from the controller before every pending task is lost.
    """

    def __init__(self, check_s: float = 30.0, controller_timeout_s: float = 600.0,
                 command_timeout_s: float = 20.0) -> None:
        self.check_s, self.controller_timeout_s = check_s, controller_timeout_s
        self.command_timeout_s = command_timeout_s
        self.states: dict[str, str] = {}
        self.last_check = float("-inf")
        self.last_answer = time.monotonic()
        self.suspect: dict[str, str] = {}

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
        states = query_states({t.split("_", 1)[0] for t in task_ids}, min(self.command_timeout_s,
                                                                            self.controller_timeout_s))
        if states is None:
            silent = now - self.last_answer
            if silent >= self.controller_timeout_s:
                return {t: f"SLURM task {t}: the controller has not answered for {silent:.0f} s; once it is back, "
                           f"scancel {t.split('_', 1)[0]} or the task may still run" for t in task_ids}
            return {}
        self.last_answer = now
        self.states.update(states)
        verdict: dict[str, str] = {}
        suspect: dict[str, str] = {}
        for task in task_ids:
            state = states.get(task)
            if state in QUEUED or state in RUNNING:
                continue
            why = (f"SLURM task {task} ended {state} without a result" if state
                   else f"SLURM task {task} is no longer known to squeue or sacct")
            if task in self.suspect:  # two checks in a row: not a result file still on its way
                verdict[task] = why
            else:
                suspect[task] = why
        self.suspect = suspect
        if suspect:  # look again soon rather than a whole period later
            self.last_check = now - self.check_s + min(self.check_s, 2.0)
        return verdict
