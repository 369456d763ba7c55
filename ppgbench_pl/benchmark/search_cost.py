"""How much a stacked search trains: epochs per trial under Hyperband, and the trial-epochs of a stack group.

Optuna's Hyperband as it behaves here, in expectation: brackets and their trial shares as Optuna allots them;
a trial checked at 0-based step ``s`` has trained ``s + 1`` epochs; the ``i``-th trial to reach a rung is
promoted when in the top ``floor(i / eta)`` there, or the best while fewer than ``eta`` have arrived.
Measured on synthetic (48 trials, at most 25 epochs): 8.1 and 8.5 epochs per trial; this gives 7.9.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Below this many validation subjects a subject-level score takes so few values that trials tie at the top
#: and Hyperband promotes nearly all of them: synthetic stiffness (5 validation subjects, the published MLP
#: search) trained 38 of 48 trials all 25 epochs, 22.1 epochs per trial against 7.9 for distinct scores.
FEW_VALIDATION_SUBJECTS = 10
TIED_COMPLETE = 0.87  # share of the trials of such a search that train every epoch (the others stop early)
HOLDOUT_SHARE = 0.2  # of the outer-training groups, held out for a neural regime's validation (PROTOCOL.md 3.3)


def epochs_distribution(n_trials: int, max_epochs: int, min_resource: int = 1,
                        reduction_factor: int = 3) -> dict[int, float]:
    """Probability that a trial of an ``n_trials`` search trains each number of epochs (module docstring)."""
    eta, top = max(int(reduction_factor), 2), max(int(max_epochs), 1)
    low, n_trials = max(int(min_resource), 1), max(int(n_trials), 1)
    if top <= low:
        return {top: 1.0}
    brackets = math.floor(math.log(top / low, eta)) + 1
    weights = [math.ceil(brackets * eta ** (brackets - 1 - b) / (brackets - b)) for b in range(brackets)]
    out: dict[int, float] = {}
    for b, weight in enumerate(weights):
        share = n_trials * weight / sum(weights)
        rungs = [low * eta ** (b + k) for k in range(brackets) if low * eta ** (b + k) < top]
        arrived = [0.0] * len(rungs)
        for part in [1.0] * int(share) + ([share - int(share)] if share > int(share) else []):
            reach = 1.0
            for k, step in enumerate(rungs):
                arrived[k] += reach * part
                there = max(arrived[k], 1.0)
                promoted = max(math.floor(there) // eta, 1) / there
                epochs = min(step + 1, top)
                out[epochs] = out.get(epochs, 0.0) + part * reach * (1 - promoted) / n_trials
                reach *= promoted
            out[top] = out.get(top, 0.0) + part * reach / n_trials
    return out


def hyperband_epochs(max_epochs: int, min_resource: int = 1, reduction_factor: int = 3, n_trials: int = 48) -> float:
    """Mean epochs a trial of an ``n_trials`` search trains (:func:`epochs_distribution`)."""
    dist = epochs_distribution(n_trials, max_epochs, min_resource, reduction_factor)
    return sum(e * p for e, p in dist.items())


@dataclass(frozen=True)
class SearchWork:
    """What one group of jobs searched in one stack trains: studies are jobs x repeats; trial-epochs in all."""

    jobs: int
    studies: int
    trials: int
    trial_epochs: float


def search_work(n_trials: int, max_epochs: int, min_resource: int, reduction_factor: int, studies_per_job: int,
                jobs: int, tied: bool = False) -> SearchWork:
    """The :class:`SearchWork` of ``jobs`` jobs of ``studies_per_job`` studies each, searched in one stack.

    ``tied``: the scores tie at the top (:data:`FEW_VALIDATION_SUBJECTS`): :data:`TIED_COMPLETE` of the trials
    train every epoch, the others stop at the first check; else Hyperband's :func:`hyperband_epochs`.
    """
    first = min(max(int(min_resource), 1) + 1, int(max_epochs))
    if tied and first < max_epochs:
        mean = max_epochs * TIED_COMPLETE + first * (1 - TIED_COMPLETE)
    else:
        mean = float(max_epochs) if tied else hyperband_epochs(max_epochs, min_resource, reduction_factor, n_trials)
    studies = max(int(studies_per_job), 1) * max(int(jobs), 1)
    return SearchWork(max(int(jobs), 1), studies, studies * n_trials, studies * n_trials * mean)


def few_validation_subjects(task: object, groups: int, n_folds: int) -> bool:
    """Whether a subject-level task's holdout has fewer than :data:`FEW_VALIDATION_SUBJECTS` subjects."""
    held = groups * (n_folds - 1) / max(n_folds, 1) * HOLDOUT_SHARE
    return getattr(task, "level", "window") == "subject" and held < FEW_VALIDATION_SUBJECTS


def regime_search_work(regime: Any, task: object, jobs: int, tied: bool = False) -> SearchWork:
    """:func:`search_work` of a neural regime's settings on a task (holdout and search repeats counted)."""
    from ppgbench_pl.regimes.search_seeds import searches_per_job

    s = regime.search
    holdouts = int(regime.subject_repeats) if getattr(task, "level", "window") == "subject" else 1
    return search_work(int(s.n_trials), int(s.epochs), int(s.min_resource), int(s.reduction_factor),
                       holdouts * searches_per_job(regime), jobs, tied)


def stack_groups(pending: Sequence[Any]) -> dict[str, int]:
    """Job id -> jobs in its stack group, grouped by the runner's own :func:`.groups.job_groups`."""
    from ppgbench_pl.benchmark.groups import job_groups

    return {jid: len(group) for group in job_groups(pending) for jid in group}
