"""A new regime variant as a Lightning callback and no change to ppgbench: partial finetuning.

Finetuning trains every encoder layer. This callback keeps all but the last ``trainable_layers``
parameter-holding layers of each trial's encoder frozen, so only the top of the encoder and the head
learn (a common way to finetune a foundation model on a small dataset). Stack it on the finetune regime:

    ppgbench fit --config configs/regime_finetune.yaml --config examples/partial_finetune.yaml

Every trial of the regime trains inside one ``Trainer.fit`` of a trial stack
(``ppgbench_pl.hpo.trial_stack.TrialStack``); ``pl_module.slots`` maps each trial to its network, so the
callback applies itself to each trial's own encoder copy at the start of every epoch (new trials join the
stack between epochs). Frozen parameters get no gradient, so AdamW leaves them untouched. The records
name the callback (``callbacks``) and it is part of the run identity, so partial and full finetuning
never share a results folder.
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import Callback
from torch import nn


def parameter_layers(encoder: nn.Module) -> list[nn.Module]:
    """The encoder's modules that hold parameters themselves, in definition order (input to output)."""
    return [m for m in encoder.modules() if any(True for _ in m.parameters(recurse=False))]


class PartialFinetune(Callback):
    """Train only the last ``trainable_layers`` parameter-holding layers of each trial's encoder.

    Args:
        trainable_layers: Layers at the output end of the encoder that keep learning (the head always does).
    """

    def __init__(self, trainable_layers: int = 2) -> None:
        if trainable_layers < 0:
            raise ValueError(f"trainable_layers must be >= 0, got {trainable_layers}")
        self.trainable_layers = trainable_layers
        #: Epochs this callback prepared, per trial (``<job>/repeat<r>/<trial number>``).
        self.epochs_applied: dict[str, int] = {}

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Freeze the early layers of every trial that trains this epoch."""
        for name, slot in getattr(pl_module, "slots", {}).items():
            encoder = getattr(slot.net, "encoder", None)
            if not slot.training or encoder is None:
                continue  # an ended trial, or a head-only trial (nothing to freeze)
            layers = parameter_layers(encoder)
            cut = max(len(layers) - self.trainable_layers, 0)
            for layer in layers[:cut]:
                layer.requires_grad_(False)
            self.epochs_applied[name] = self.epochs_applied.get(name, 0) + 1
