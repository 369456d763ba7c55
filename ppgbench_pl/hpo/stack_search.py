"""Many Optuna studies searched in one ``Trainer.fit`` of a :class:`TrialStack`, batch by batch (#27)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning as L
import numpy as np
import optuna
import torch

from ppgbench_pl.hpo.optuna_search import PersistentStudy, TrialOutcome
from ppgbench_pl.hpo.search_events import epoch_ended
from ppgbench_pl.hpo.trial_stack import Slot, TrialStack


@dataclass
class StudyPlan:
    """One study searched in a stack; ``on_complete(number, value, weights)`` runs before a complete trial is told."""

    key: str
    study: PersistentStudy
    space: Mapping[str, Sequence[Any]]
    #: ``(study key, trial number, params) -> Slot``; ``score``: validation outputs' selection score (higher: better).
    make_slot: Callable[[str, int, Mapping[str, Any]], Slot]
    score: Callable[[np.ndarray, Mapping[str, Any]], float]
    max_epochs: int
    on_complete: Callable[[int, float, dict[str, Any]], object] | None = None
    on_told: Callable[[], None] | None = None


@dataclass
class TrialRun:
    """A trial being trained: its slot, best epoch so far, and its outcome once ended."""

    trial: optuna.Trial
    slot: Slot
    best: float = -math.inf
    best_epoch: int = 0
    weights: dict[str, Any] | None = None
    history: list[float] = field(default_factory=list)
    outcome: TrialOutcome | None = None


def snapshot(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of a network's state dict (the best epoch's weights)."""
    return {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}


class StackSearch:
    """The search state of one stacked fit: each study's current batch; :meth:`end_epoch` runs after every epoch."""

    def __init__(self, plans: Sequence[StudyPlan]) -> None:
        keys = [p.key for p in plans]
        if len(set(keys)) != len(keys):
            raise ValueError(f"study keys must be unique, got {keys}")
        self.plans = list(plans)
        self.batches: dict[str, list[TrialRun]] = {}

    def ask(self, plan: StudyPlan) -> list[Slot]:
        """Ask a study's next batch; its runs become the study's current batch."""
        trials = plan.study.ask(plan.space)
        runs = [TrialRun(t, plan.make_slot(plan.key, t.number, t.params)) for t in trials]
        self.batches[plan.key] = runs
        return [run.slot for run in runs]

    def first_slots(self) -> list[Slot]:
        """The first batch of every study with trials left."""
        return [slot for plan in self.plans if plan.study.remaining for slot in self.ask(plan)]

    def unfinished(self) -> int:
        """Trials of every study's budget not finished yet (0 once the fit has run its course)."""
        return sum(plan.study.remaining for plan in self.plans)

    def abandon(self) -> None:
        """Fail every running trial without counting it (an interruption cut it short)."""
        for plan in self.plans:
            runs = [run.trial for run in self.batches.get(plan.key, []) if run.outcome is None]
            plan.study.abandon(runs)

    def end_epoch(self, trainer: L.Trainer, module: TrialStack) -> None:
        """Score, report and prune every batch's trials; tell ended batches and add the next ones."""
        epoch_ended(self)  # the run's progress line, when one listens in this process
        for plan in self.plans:
            runs = self.batches.get(plan.key)
            if not runs:
                continue
            live = [run for run in runs if run.outcome is None]
            for run in live:
                self.score(plan, run, module)
            live = [run for run in live if run.outcome is None]
            for run in live:  # every trial of the batch reports this epoch before any asks the pruner (in order)
                run.trial.report(run.best, run.slot.epoch)
            for run in live:
                self.decide(plan, run, module)
            if all(run.outcome is not None for run in runs):
                self.tell(plan)
                if plan.study.remaining:
                    for slot in self.ask(plan):
                        module.add_slot(slot)
        if not self.batches:
            trainer.should_stop = True

    def tell(self, plan: StudyPlan) -> None:
        """Tell and store a study's ended batch (complete trials' weights offered first), in trial order."""
        for run in self.batches.pop(plan.key):
            assert run.outcome is not None
            if run.outcome.state == "complete" and plan.on_complete is not None:
                assert run.outcome.value is not None and run.outcome.weights is not None
                plan.on_complete(run.trial.number, run.outcome.value, run.outcome.weights)
            plan.study.finish(run.trial, run.outcome)
        if plan.on_told is not None:
            plan.on_told()

    def score(self, plan: StudyPlan, run: TrialRun, module: TrialStack) -> None:
        """Score a training slot's validation epoch; a new best keeps its weights."""
        slot = run.slot
        if slot.state == "training":
            if slot.metric is not None:  # the torchmetrics selection metric fed by the validation loop
                value = float(slot.metric.compute())
            else:
                out = torch.cat(module.val_outputs[slot.name]).numpy().astype(np.float64)
                value = float(plan.score(out, run.trial.params)) if np.isfinite(out).all() else math.nan
            if not math.isfinite(value):
                slot.state = "diverged"
            else:
                run.history.append(value)
                if value > run.best:
                    run.best, run.best_epoch, run.weights = value, slot.epoch + 1, snapshot(slot.net)
        if slot.state == "diverged" and not run.best_epoch:
            run.outcome = TrialOutcome("failed", epochs_run=slot.epoch + 1, failure=(
                f"diverged: non-finite training loss or validation score at epoch {slot.epoch + 1}"))
            module.end_slot(slot)

    def decide(self, plan: StudyPlan, run: TrialRun, module: TrialStack) -> None:
        """Ask the pruner about a reported trial; end it when pruned or at its epoch budget."""
        slot = run.slot
        trained = len(run.history)
        if run.trial.should_prune():
            run.outcome = TrialOutcome("pruned", epochs_run=slot.epoch + 1 if slot.training else trained)
        elif slot.epoch + 1 >= plan.max_epochs:
            run.outcome = TrialOutcome("complete", value=run.best, best_epoch=run.best_epoch, epochs_run=trained,
                                       weights=run.weights)
        slot.epoch += 1
        if run.outcome is not None:
            module.end_slot(slot)


def fixed_epochs(trainer: L.Trainer, module: TrialStack) -> None:
    """Epoch step of slots trained for a fixed number of epochs (refit): end each at its budget."""
    for slot in module.active():
        slot.epoch += 1
        if slot.epoch >= slot.max_epochs or slot.state == "diverged":
            module.end_slot(slot)
    if not module.active():
        trainer.should_stop = True
