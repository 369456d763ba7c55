"""A resume replays its sampler's asks on scratch studies to stay on the uninterrupted search's path (#41)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

#: User attribute of trials finished after a resume whose stored history could not be replayed (why).
OFF_PATH_ATTR = "resumed_without_replay"


class NotReplayable(Exception):
    """The stored trials are not the history of an uninterrupted search of these settings (the message says why)."""


def replay(finished: Mapping[int, FrozenTrial], sampler: BaseSampler, name: str, n_trials: int, batch: int,
           dists: Mapping[str, BaseDistribution]) -> dict[int, dict[str, Any]]:
    """Replay the asks that led to ``finished`` on ``sampler`` (else ``NotReplayable``); the cut batch's params."""
    last = max(finished, default=-1)
    for start in range(0, n_trials, batch):  # the batches an uninterrupted search asks
        members = range(start, min(start + batch, n_trials))
        if not any(n in finished for n in members):
            if last > members[-1]:
                raise NotReplayable(f"trial {last} is stored but no trial of the earlier batch "
                                    f"{members[0]}-{members[-1]} is")
            break
        gaps = [n for n in range(members[0]) if n not in finished]
        if gaps:
            raise NotReplayable(f"trial {gaps[0]} is missing before the batch {members[0]}-{members[-1]}")
        scratch = optuna.create_study(storage=optuna.storages.InMemoryStorage(), study_name=name,
                                      direction="maximize", sampler=sampler)
        scratch.add_trials([finished[n] for n in range(members[0])])
        asked = [scratch.ask(fixed_distributions=dict(dists)) for _ in members]
        for trial, number in zip(asked, members, strict=True):
            stored = finished.get(number)
            if stored is not None and stored.params != trial.params:
                raise NotReplayable(f"trial {number} was stored with {stored.params}, the replayed sampler "
                                    f"draws {trial.params}")
        pending = {n: dict(t.params) for t, n in zip(asked, members, strict=True) if n not in finished}
        if pending:
            if last > members[-1]:
                raise NotReplayable(f"trial {last} is stored but the batch {members[0]}-{members[-1]} never "
                                    "finished")
            return pending
    return {}


def restore(study: optuna.Study, finished: Mapping[int, FrozenTrial], pending: Mapping[int, dict[str, Any]],
            replayed: BaseSampler | None, dists: Mapping[str, BaseDistribution]) -> list[optuna.Trial]:
    """Fill a new in-memory ``study`` with the stored trials at their numbers; returns the re-asked pending ones."""
    sampler = study.sampler
    study.sampler = optuna.samplers.RandomSampler(seed=0)
    asked = []
    for number in range(max([*finished, *pending], default=-1) + 1):
        if number in finished:
            study.add_trial(finished[number])
        elif number in pending:
            study.enqueue_trial(pending[number])
            asked.append(study.ask(fixed_distributions=dict(dists)))
        else:
            study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
    study.sampler = replayed if replayed is not None else sampler
    return asked


def resume(study: optuna.Study, finished: Mapping[int, FrozenTrial], sampler: BaseSampler, n_trials: int,
           batch: int, dists: Mapping[str, BaseDistribution]) -> tuple[list[optuna.Trial], str | None]:
    """Restore the stored trials into ``study``: (the re-asked unfinished trials, why not replayable or None)."""
    try:
        pending = replay(finished, sampler, study.study_name, n_trials, batch, dists)
    except NotReplayable as exc:
        warnings.warn(f"study {study.study_name}: the stored trials cannot be replayed ({exc}); the resumed "
                      "search restarts its sampler from its seed and can draw other trials than an uninterrupted "
                      f"one (its trials say so in user attribute {OFF_PATH_ATTR!r})", stacklevel=3)
        return restore(study, finished, {}, None, dists), str(exc)
    return restore(study, finished, pending, sampler, dists), None
