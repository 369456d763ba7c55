"""What every trial engine does with a trial after each epoch: score it, keep its best, report, prune.

The batched MLP engine, both stacked finetune modes and the Lightning reference loop share these, so a
trial is judged the same way whichever engine trained it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ppgbench_pl.hpo.optuna_search import TrialOutcome

#: ``score(trial index, validation outputs [Nv, O])`` -> selection score (higher is better).
ScoreFn = Callable[[int, np.ndarray], float]
#: ``on_epoch(trial index, 0-based epoch, best-so-far)`` -> True when the trial is pruned.
EpochHook = Callable[[int, int, float], bool]


def score_epoch(
    i: int,
    epoch: int,
    outputs: np.ndarray,
    score: ScoreFn,
    best: dict[int, tuple[float, int]],
    on_epoch: EpochHook | None,
    remember: Callable[[], None],
) -> Literal["diverged", "pruned", "kept"]:
    """Score trial ``i``'s validation outputs after 0-based ``epoch``, keep its best, report it.

    The one per-trial step of every stacked engine: ``best[i]`` is updated (and ``remember()`` saves the
    weights) on a better value; a non-finite output or score is ``diverged`` (the caller finishes it with
    :func:`finish_diverged`), and ``pruned`` when ``on_epoch`` says so.
    """
    value = float(score(i, outputs)) if np.isfinite(outputs).all() else math.nan
    if not math.isfinite(value):
        return "diverged"
    if value > best[i][0]:
        best[i] = (value, epoch + 1)
        remember()
    if on_epoch is not None and on_epoch(i, epoch, best[i][0]):
        return "pruned"
    return "kept"


def finish_diverged(
    i: int,
    epoch: int,
    epochs: int,
    best: tuple[float, int],
    on_epoch: EpochHook | None,
    weights: dict[str, Any] | None,
) -> TrialOutcome:
    """Outcome of a trial that went non-finite at (1-based) ``epoch``: as published, its best earlier epoch.

    It keeps reporting its best-so-far value for the epochs it would still have trained (so Hyperband
    treats it as the published loop does, and may prune it); without any finite epoch it fails.
    """
    value, best_epoch = best
    if not best_epoch or weights is None:
        return TrialOutcome(
            "failed",
            epochs_run=epoch,
            failure=f"diverged: non-finite training loss or validation score at epoch {epoch}",
        )
    for later in range(epoch - 1, epochs):
        if on_epoch is not None and on_epoch(i, later, value):
            return TrialOutcome("pruned", epochs_run=later + 1)
    return TrialOutcome("complete", value=value, best_epoch=best_epoch, epochs_run=epoch, weights=weights)
