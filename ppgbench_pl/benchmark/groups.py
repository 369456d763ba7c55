"""Which pending jobs a worker runs together (a neural regime's ``stack_jobs``), and one outcome per job back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppgbench_pl.benchmark.plan import Job
from ppgbench_pl.benchmark.worker import JobLost, JobOutcome, JobSpec


def job_groups(pending: Sequence[Job], processes: int = 1) -> list[list[str]]:
    """Pending jobs in plan order, those of one (model, task, regime) cell batched by the regime's ``stack_jobs``.

    With fewer groups of trial-training jobs than job ``processes``, the largest are halved until each process
    has one (or each is one job): a stack is a speed setting, its jobs' records are the same apart or together.
    """
    groups: list[list[str]] = []
    open_groups: dict[tuple[str, str, str], list[str]] = {}
    for job in pending:
        size = int(getattr(job.regime, "stack_jobs", 1) or 1)  # 1 (or less): a group per job
        key = (job.model_name, job.task.name, job.regime.name)
        group = open_groups.get(key)
        if group is None or len(group) >= max(size, 1):
            group = open_groups[key] = []
            groups.append(group)
        group.append(job.job_id)
    regimes = {job.job_id: job.regime for job in pending}
    while len(side := [g for g in groups if regimes[g[0]].trains_trials]) < processes:
        largest = max(side, key=len, default=[])
        if len(largest) < 2:
            break
        at, half = groups.index(largest), -(-len(largest) // 2)
        groups[at:at + 1] = [largest[:half], largest[half:]]
    return groups


def member_outcomes(spec: JobSpec, result: Any) -> list[JobOutcome]:
    """One outcome per job of a spec: a group's members, or a lost one for each job of a spec that died."""
    if not isinstance(result, JobOutcome):
        said = str(result) if isinstance(result, JobLost) else f"{type(result).__name__}: {result}"
        error = said.splitlines()[0] if said else type(result).__name__
        return [JobOutcome(jid, "lost", error) for jid in (list(spec.group) or [spec.job_id])]
    return result.members or [result]
