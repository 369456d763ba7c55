"""One Optuna trial as a Lightning ``Trainer.fit``: the reference trial engine of both neural regimes.

:class:`EpochSelection` scores every validation epoch with the task's selection metric on the whole
epoch's outputs, keeps the best-so-far value and the weights of that epoch, and logs the best-so-far
value, which optuna-integration's :class:`PyTorchLightningPruningCallback` reports to the trial and
prunes on (PROTOCOL.md 4.5: the value reported each epoch is the best so far).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import lightning as L
import numpy as np
import optuna
import torch
from lightning.pytorch.callbacks import Callback
from optuna_integration import PyTorchLightningPruningCallback
from torch.utils.data import DataLoader

from ppgbench_pl.hpo.optuna_search import TrialOutcome
from ppgbench_pl.hpo.trial_epochs import finish_diverged
from ppgbench_pl.tasks.encoder_task import TrainingDiverged

MONITOR = "val/best_selection"
#: What to keep of a module at a new best epoch.
Snapshot = Callable[[L.LightningModule], dict[str, Any]]


def module_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of a module's state dict."""
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


class EpochSelection(Callback):
    """Score each validation epoch; remember the best score, its (1-based) epoch and its weights.

    Args:
        score: Selection score of the whole validation set's outputs (higher is better).
        snapshot: What to keep of the module at a new best epoch (default: its full state dict).
        monitor: Name under which the best-so-far score is logged for the pruning callback.

    """

    def __init__(self, score: Callable[[np.ndarray], float], snapshot: Snapshot = module_state,
                 monitor: str = MONITOR) -> None:
        self.score, self.snapshot, self.monitor = score, snapshot, monitor
        self.history: list[float] = []
        self.best, self.best_epoch = -np.inf, 0
        self.best_state: dict[str, Any] | None = None
        self._outputs: list[torch.Tensor] = []

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Start collecting this epoch's outputs."""
        self._outputs = []

    def on_validation_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any,
                                batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        """Keep the batch outputs that ``validation_step`` returned."""
        self._outputs.append(outputs["outputs"].detach().float().cpu())

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Score the epoch, update the best, log the best-so-far value.

        Raises:
            TrainingDiverged: Non-finite outputs or a non-finite score.

        """
        if trainer.sanity_checking:
            return
        out = torch.cat(self._outputs).numpy().astype(np.float64)
        if not np.isfinite(out).all():
            raise TrainingDiverged(f"non-finite validation outputs at epoch {pl_module.current_epoch + 1}")
        value = float(self.score(out))
        if not np.isfinite(value):
            raise TrainingDiverged(f"non-finite selection score at epoch {pl_module.current_epoch + 1}")
        self.history.append(value)
        if value > self.best:
            self.best, self.best_epoch = value, pl_module.current_epoch + 1
            self.best_state = self.snapshot(pl_module)
        pl_module.log(self.monitor, self.best, prog_bar=False, on_epoch=True)


@contextmanager
def frozen_parts_expected() -> Iterator[None]:
    """Silence Lightning's warning about modules in eval mode: frozen encoders stay in eval mode by design."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
        yield


def fit_trial(make_trainer: Callable[[list[Callback]], L.Trainer], module: L.LightningModule,
              train_loader: DataLoader, val_loader: DataLoader, score: Callable[[np.ndarray], float],
              trial: optuna.Trial | None, snapshot: Snapshot = module_state) -> TrialOutcome:
    """Train one trial with per-epoch selection and Hyperband pruning.

    A non-finite loss or score stops training; the trial then completes with its best earlier epoch (it fails
    without one), as in the published loop, which trains on and never beats that epoch again.

    Args:
        make_trainer: Builds the inner trainer (max epochs, device) around the given callbacks.
        module: The LightningModule to train (validation_step returns ``{"loss", "outputs"}``).
        train_loader: Holdout-fit rows, shuffled by the trial's seed.
        val_loader: Validation-group rows.
        score: Selection score of the validation outputs.
        trial: The Optuna trial to report to and prune (``None``: no pruning).
        snapshot: What to keep of the module at the best epoch.

    """
    selection = EpochSelection(score, snapshot)
    callbacks: list[Callback] = [selection]
    pruning = PyTorchLightningPruningCallback(trial, monitor=MONITOR) if trial is not None else None
    if pruning is not None:
        callbacks.append(pruning)
    trainer = make_trainer(callbacks)
    try:
        with frozen_parts_expected():
            trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader)
        if pruning is not None:
            pruning.check_pruned()
    except optuna.TrialPruned:
        return TrialOutcome("pruned", epochs_run=len(selection.history))
    except TrainingDiverged as exc:  # as published: the trial completes with its best earlier epoch
        def report(_: int, epoch: int, best: float) -> bool:
            assert trial is not None
            trial.report(best, epoch)
            return trial.should_prune()

        outcome = finish_diverged(0, len(selection.history) + 1, int(trainer.max_epochs or 1),
                                  (selection.best, selection.best_epoch), report if trial is not None else None,
                                  selection.best_state)
        if outcome.state == "failed":
            outcome.failure = f"diverged: {exc}"
        return outcome
    return TrialOutcome("complete", value=selection.best, best_epoch=selection.best_epoch,
                        epochs_run=len(selection.history), weights=selection.best_state)
