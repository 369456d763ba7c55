"""The plan: every (model, task, regime, seed, outer fold) job, in the published order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.regimes.base import Regime
from ppgbench_pl.results.records import job_id


@dataclass(frozen=True)
class Job:
    """One outer evaluation; ``model`` indexes the run's encoder list."""

    model: int
    model_name: str
    task: TaskSpec
    regime: Regime
    seed: int
    fold: int

    @property
    def job_id(self) -> str:
        """Stable id (PROTOCOL.md 7.4), also the record folder name."""
        return job_id(self.model_name, self.task.name, self.regime.name, self.seed, self.fold)


def build_plan(encoders: Sequence[PPGEncoder], tasks: Sequence[TaskSpec], regimes: Sequence[Regime],
               seeds: Sequence[int], folds: Sequence[int]) -> list[Job]:
    """Jobs ordered model -> task -> seed -> fold -> regime; regimes skip tasks they don't apply to."""
    return [
        Job(m, encoder.name, task, regime, seed, fold)
        for m, encoder in enumerate(encoders)
        for task in tasks
        for seed in seeds
        for fold in folds
        for regime in regimes
        if regime.applies_to(task, encoder)
    ]
