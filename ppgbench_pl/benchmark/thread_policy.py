"""Intra-op threads per workload: one per probe job (small kernels), the executor's share for encoder work."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from ppgbench_pl.errors import ConfigError

ENV = "PPGBENCH_THREADS"


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, which ``taskset`` and SLURM narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def thread_override(given: int | None) -> tuple[int | None, str]:
    """(threads, where they came from): ``--threads``, else ``$PPGBENCH_THREADS``, else (None, 'default')."""
    if given is not None:
        if int(given) < 1:
            raise ConfigError(f"--threads must be at least 1, got {given}")
        return int(given), "--threads"
    said = os.environ.get(ENV, "").strip()
    if not said:
        return None, "default"
    if not said.isdigit() or int(said) < 1:
        raise ConfigError(f"{ENV}={said!r}: not a whole number of threads of at least 1")
    return int(said), ENV


@dataclass(frozen=True)
class ThreadPolicy:
    """Threads per process for probe jobs, encoder jobs (``None``: the default) and this process's embedding pass."""

    probe: int | None
    encoder: int | None
    embedding_pass: int
    source: str
    cores: int
    processes: int | None
    #: Which jobs run in those processes: ``all``, or ``networks`` (trial stacks, finetuning; the rest in this one).
    side_by_side: str = "all"

    def for_job(self, uses_embeddings: bool) -> int | None:
        """Threads of one job: a regime that reads embeddings is probe work, one that trains the encoder is not."""
        return self.probe if uses_embeddings else self.encoder

    def record(self) -> dict[str, Any]:
        """What ``run.json`` says under ``threads`` (the latest command's policy)."""
        return asdict(self)

    def line(self) -> str:
        """The one line printed at start."""
        encoder = "the worker's default" if self.encoder is None else str(self.encoder)
        jobs = "jobs that train networks in" if self.side_by_side == "networks" else "jobs in"
        where = "" if self.processes is None else f"; {jobs} {self.processes} process(es) side by side on " \
                                                  f"{self.cores} core(s)"
        if self.source != "default":
            return f"threads: {self.probe} per process for every workload ({self.source}){where}"
        return (f"threads: probe jobs {self.probe} per process (small kernels), embedding pass "
                f"{self.embedding_pass}, finetuning {encoder}{where}; --threads N or {ENV}=N overrides")


def choose_policy(executor: Any, given: int | None = None) -> ThreadPolicy:
    """The override (``given``: ``--threads``) if any, else one thread for probes, the executor's share for encoders."""
    import torch

    override, source = thread_override(given)
    processes = executor.processes_here() if hasattr(executor, "processes_here") else None
    which = "networks" if getattr(executor, "pools_networks_only", False) else "all"
    if override is not None:
        if override > 1 and which == "networks":  # a forked job process runs at one thread: every job here
            processes = 1
        return ThreadPolicy(override, override, override, source, usable_cores(), processes, which)
    here = torch.get_num_threads()  # torch's own default (the cores, or what OMP_NUM_THREADS says)
    encoder = executor.threads_per_job()
    if encoder is None and processes == 1:  # the jobs run in this process
        encoder = here
    return ThreadPolicy(1, encoder, here, source, usable_cores(), processes, which)
