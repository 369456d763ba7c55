"""Trial and epoch progress of stacked searches for a display in this process (a listener's error stays there)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EpochEvent:
    """One stack epoch of one search (``id()`` of the StackSearch): trials trained, finished before it, in all."""

    search: int
    trial_epochs: int
    trials_done: int
    trials_total: int


Listener = Callable[[EpochEvent], None]
_LISTENERS: list[Listener] = []


def listen(listener: Listener) -> None:
    """Call ``listener`` with every :class:`EpochEvent` of this process from now on."""
    _LISTENERS.append(listener)


def listen_only(listener: Listener | None) -> None:
    """Make ``listener`` the only one, or none (a forked job process drops the display it inherited)."""
    _LISTENERS[:] = [listener] if listener is not None else []


def listening() -> bool:
    """Whether anything listens (a pool's workers forward their events only then)."""
    return bool(_LISTENERS)


def unlisten(listener: Listener) -> None:
    """Stop calling ``listener`` (nothing when it is not listening)."""
    if listener in _LISTENERS:
        _LISTENERS.remove(listener)


def epoch_ended(search: Any) -> None:
    """Tell the listeners about the epoch ``search`` (a StackSearch, before its decisions) just trained."""
    if not _LISTENERS:
        return
    trained = sum(run.outcome is None for runs in search.batches.values() for run in runs)
    done = sum(plan.study.n_finished for plan in search.plans)
    total = sum(plan.study.settings.n_trials for plan in search.plans)
    announce(EpochEvent(id(search), int(trained), int(done), int(total)))


def announce(event: EpochEvent) -> None:
    """Call every listener with ``event`` (also for events a job process forwarded)."""
    for listener in list(_LISTENERS):
        try:
            listener(event)
        except Exception:  # noqa: BLE001, S110 - a display's failure must not fail the search
            pass
