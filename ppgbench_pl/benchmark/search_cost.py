"""How much a stacked search trains: epochs per trial under Hyperband, trial-epochs and stack epochs of a group.

The neural regimes train the studies of several jobs side by side in one ``Trainer.fit``
(:mod:`ppgbench_pl.hpo.stack_search`): a group of ``G`` jobs (the regime's ``stack_jobs``) with ``R`` holdout
repeats each holds ``W = G x R x parallel_trials`` trials at once. Its cost has two parts, which the cost
model prices separately: every trial-epoch (one trial, one epoch over its rows) and every stack epoch (the
loop, validation and search step the stack pays once, however wide). A study asks ``parallel_trials``
trials at a time and the next batch only when all have ended, so the stack trains
``ceil(n_trials / parallel_trials) x E[longest trial of a batch]`` epochs.

Epochs per trial follow Optuna's Hyperband pruner as it behaves here: brackets and their trial shares as
Optuna allots them; in bracket ``b`` a trial is checked at steps ``min x eta^(b+k)`` (0-based epochs, so one
checked at step ``s`` has trained ``s + 1``); the ``i``-th trial to reach a rung is promoted when it is in
the top ``floor(i / eta)`` of those there, or is the best of them while fewer than ``eta`` have arrived
(Optuna's rule), taken with exchangeable values, in expectation. Measured on the synthetic dataset
(published MLP budget, 48 trials of at most 25 epochs): 8.1 and 8.5 epochs per trial; this gives 7.9.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Below this many validation subjects a subject-level task's selection score takes so few values that
#: trials tie at the top and Hyperband promotes nearly all of them (the holdout is 20 % of the outer-training
#: subjects). Measured on synthetic stiffness (5 validation subjects, published MLP search): 38 of 48 trials
#: trained all 25 epochs, 22.1 epochs per trial against 7.9 for distinct scores.
FEW_VALIDATION_SUBJECTS = 10
#: Share of the trials of such a search that train every epoch (the others stop at the first check).
TIED_COMPLETE = 0.87
#: Share of the outer-training groups a neural regime holds out for validation (PROTOCOL.md 3.3).
HOLDOUT_SHARE = 0.2


def epochs_distribution(n_trials: int, max_epochs: int, min_resource: int = 1,
                        reduction_factor: int = 3) -> dict[int, float]:
    """Probability that a trial of an ``n_trials`` search trains each number of epochs (see the docstring)."""
    eta, top = max(int(reduction_factor), 2), max(int(max_epochs), 1)
    low, n_trials = max(int(min_resource), 1), max(int(n_trials), 1)
    if top <= low:
        return {top: 1.0}
    brackets = math.floor(math.log(top / low, eta)) + 1
    weights = [math.ceil(brackets * eta ** (brackets - 1 - b) / (brackets - b)) for b in range(brackets)]
    out: dict[int, float] = {}
    for b, weight in enumerate(weights):
        share = n_trials * weight / sum(weights)
        rungs, k = [], 0
        while (step := low * eta ** (b + k)) < top:
            rungs.append(step)
            k += 1
        arrived = [0.0] * len(rungs)
        whole = int(share)
        for part in [1.0] * whole + ([share - whole] if share > whole else []):
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


def longest_of(dist: dict[int, float], k: int) -> float:
    """Expected epochs of the longest of ``k`` trials drawn from ``dist`` (a batch lasts that long)."""
    if k <= 1:
        return sum(e * p for e, p in dist.items())
    out, below = 0.0, 0.0
    for epochs in sorted(dist):
        at_most = min(below + dist[epochs], 1.0)
        out += epochs * (at_most ** k - below ** k)
        below = at_most
    return out


@dataclass(frozen=True)
class SearchWork:
    """What one group of jobs searched in one stack trains.

    Attributes:
        jobs: Jobs of the group (``G``).
        studies: Studies of the group (``G x R``: every holdout repeat and search repeat of every job).
        trials: Trials the group finishes (``studies x n_trials``).
        trial_epochs: Epochs its trials train in all (each over its own rows).
        stack_epochs: Epochs of the stacked fit (the longest study's sequence of batches).
    """

    jobs: int
    studies: int
    trials: int
    trial_epochs: float
    stack_epochs: float


def tied_distribution(max_epochs: int, min_resource: int = 1) -> dict[int, float]:
    """Epochs per trial when scores tie at the top (:data:`FEW_VALIDATION_SUBJECTS`)."""
    first = min(max(int(min_resource), 1) + 1, int(max_epochs))
    return {int(max_epochs): TIED_COMPLETE, first: 1 - TIED_COMPLETE} if first < max_epochs else {int(max_epochs): 1.0}


def search_work(n_trials: int, max_epochs: int, min_resource: int, reduction_factor: int, parallel_trials: int,
                studies_per_job: int, jobs: int, tied: bool = False) -> SearchWork:
    """The :class:`SearchWork` of ``jobs`` jobs of ``studies_per_job`` studies each, searched in one stack.

    ``tied``: the scores tie at the top (:func:`tied_distribution`), else Hyperband's :func:`epochs_distribution`.
    """
    dist = tied_distribution(max_epochs, min_resource) if tied else epochs_distribution(
        n_trials, max_epochs, min_resource, reduction_factor)
    mean = sum(e * p for e, p in dist.items())
    batch = max(min(int(parallel_trials), int(n_trials)), 1)
    studies = max(int(studies_per_job), 1) * max(int(jobs), 1)
    stack = math.ceil(n_trials / batch) * longest_of(dist, batch)
    return SearchWork(max(int(jobs), 1), studies, studies * n_trials, studies * n_trials * mean, stack)


def few_validation_subjects(task: object, groups: int, n_folds: int) -> bool:
    """Whether a subject-level task's holdout has fewer than :data:`FEW_VALIDATION_SUBJECTS` subjects."""
    held = groups * (n_folds - 1) / max(n_folds, 1) * HOLDOUT_SHARE
    return getattr(task, "level", "window") == "subject" and held < FEW_VALIDATION_SUBJECTS


def regime_search_work(regime: object, task: object, jobs: int, tied: bool = False) -> SearchWork:
    """:func:`search_work` of a neural regime's settings on a task (holdout and search repeats counted)."""
    from ppgbench_pl.regimes.search_seeds import searches_per_job

    s = regime.search  # type: ignore[attr-defined]
    level = getattr(task, "level", "window")
    repeats = (int(regime.subject_repeats) if level == "subject" else 1) * searches_per_job(regime)  # type: ignore[attr-defined]
    return search_work(int(s.n_trials), int(s.epochs), int(s.min_resource), int(s.reduction_factor),
                       int(s.batch), repeats, jobs, tied)


def stack_groups(pending: Sequence[Any]) -> dict[str, int]:
    """Job id -> jobs in its stack group, grouped by the runner's own :func:`.groups.job_groups`."""
    from ppgbench_pl.benchmark.groups import job_groups

    return {jid: len(group) for group in job_groups(pending) for jid in group}
