"""Each trial in its own ``Trainer.fit`` (stock callbacks), by the same ``StackSearch``: the stack's numbers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import lightning as L
import torch
from torch import Tensor, nn

from ppgbench_pl.hpo.optuna_search import SearchFailed, TrialOutcome
from ppgbench_pl.hpo.stack_search import StackSearch, StudyPlan, TrialRun
from ppgbench_pl.hpo.trial_stack import Slot, TrialStack

#: Class attribute of a callback written for the trial stack (it walks ``pl_module.slots``).
STACK_AWARE = "ppgbench_stack_aware"


def stack_aware(callbacks: Sequence[Any]) -> bool:
    """True when every callback declares ``ppgbench_stack_aware = True`` (or there is none): trials stack."""
    return all(getattr(c, STACK_AWARE, False) is True for c in callbacks)


def per_trial_note(callbacks: Sequence[Any]) -> dict[str, str]:
    """What a record says about how its trials were fitted (nothing when they stacked, as before)."""
    return {} if stack_aware(callbacks) else {"trial_fits": "one Trainer.fit per trial (callbacks not stack-aware)"}


def per_trial_line(callbacks: Sequence[Any]) -> str:
    """The run's one line on the slower path (the runner prints it once, before any job)."""
    names = ", ".join(type(c).__name__ for c in callbacks if getattr(c, STACK_AWARE, False) is not True)
    return (f"trainer.callbacks {names}: not stack-aware ({STACK_AWARE} = True), so each trial of the mlp and "
            "finetune regimes trains in its own Trainer.fit (one fit per trial, slower than the trial stack)")


class TrialModule(TrialStack):
    """One trial as a LightningModule for callbacks: ``backbone``, ``head``, ``val_score``, trainable parameters."""

    def __init__(self, slot: Slot, eval_batch_size: int, step: Any = None) -> None:
        super().__init__([slot], eval_batch_size)
        self.slot = slot
        self.search = step
        if not isinstance(getattr(slot.net, "encoder", None), nn.Module):
            self.identity = nn.Identity()

    @property
    def backbone(self) -> nn.Module:
        """The trial's own encoder copy (finetuning), or an identity (a head on cached features)."""
        encoder = getattr(self.slot.net, "encoder", None)
        return encoder if isinstance(encoder, nn.Module) else self.identity

    @property
    def head(self) -> nn.Module:
        """The trial's MLP head."""
        head = getattr(self.slot.net, "head", None)
        return head if isinstance(head, nn.Module) else self.slot.net

    def forward(self, x: Tensor) -> Tensor:
        """Head outputs of prepared rows."""
        return self.slot.net(x)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The slot's AdamW groups with the parameters that require a gradient (all, unless a callback froze some)."""
        groups = [{**g, "params": [p for p in g["params"] if p.requires_grad]} for g in self.slot.groups]
        return torch.optim.AdamW([g for g in groups if g["params"]], fused=True)

    def on_validation_epoch_end(self) -> None:
        """Log the trial's selection score of this epoch as ``val_score`` (for callbacks to monitor)."""
        if self.slot.training and self.slot.metric is not None:
            self.log("val_score", float(self.slot.metric.compute()))


class TrialEpochs:
    """The search step of one trial fitted alone: score, report, prune; stop its fit once it ended (copies share it)."""

    def __init__(self, search: StackSearch, plan: StudyPlan, run: TrialRun) -> None:
        self.search, self.plan, self.run = search, plan, run

    def __deepcopy__(self, memo: dict[int, Any]) -> TrialEpochs:
        return self

    def end_epoch(self, trainer: L.Trainer, module: TrialStack) -> None:
        """The stack's per-trial epoch step for this trial alone."""
        run = self.run
        self.search.score(self.plan, run, module)
        if run.outcome is None:
            run.trial.report(run.best, run.slot.epoch)
            self.search.decide(self.plan, run, module)
        if run.outcome is not None:
            trainer.should_stop = True


def stopped_early(run: TrialRun) -> TrialOutcome:
    """A trial a callback stopped early: complete at its best epoch so far (as after divergence), else failed."""
    if run.best_epoch and math.isfinite(run.best):
        return TrialOutcome("complete", value=run.best, best_epoch=run.best_epoch, epochs_run=len(run.history),
                            weights=run.weights)
    return TrialOutcome("failed", epochs_run=run.slot.epoch,
                        failure=f"a callback stopped the trial's fit at epoch {run.slot.epoch} before any scored epoch")


def fit_each_trial(search: StackSearch | None, slots: Sequence[Slot], eval_batch_size: int,
                   fit: Callable[[TrialModule], None]) -> None:
    """Every study's trials (or the fixed-length ``slots``), each in its own fit (``fit`` runs ``Trainer.fit``)."""
    if search is None:
        for slot in slots:
            module = TrialModule(slot, eval_batch_size)
            fit(module)
            if module.active():
                raise SearchFailed(f"{slot.name}: Trainer.fit stopped before the {slot.max_epochs} epochs of this "
                                   "fixed-length fit (a callback set trainer.should_stop?)")
        return
    try:
        for plan in search.plans:
            while plan.study.remaining:
                search.ask(plan)
                for run in search.batches[plan.key]:
                    fit(TrialModule(run.slot, eval_batch_size, TrialEpochs(search, plan, run)))
                    if run.outcome is None:
                        run.outcome = stopped_early(run)
                search.tell(plan)
    except BaseException:
        search.abandon()
        raise
