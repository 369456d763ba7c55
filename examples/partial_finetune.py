"""A new regime variant as a Lightning callback and no change to ppgbench: partial finetuning.

Finetuning trains every encoder layer. This callback keeps all but the last ``trainable_layers``
parameter-holding layers of each trial's encoder frozen, so only the top of the encoder and the head
learn (a common way to finetune a foundation model on a small dataset). Stack it on the finetune regime:

    ppgbench fit --config configs/regime_finetune.yaml --config examples/partial_finetune.yaml

It is a plain Lightning ``BaseFinetuning`` callback: every trial of the regime is a LightningModule of its
own (``ppgbench_pl.hpo.per_trial.TrialModule``) with its encoder copy as ``pl_module.backbone`` and its head
as ``pl_module.head``, trained in its own ``Trainer.fit`` with its own copy of this callback. The early layers
are frozen before the trial's optimiser is built, so they never join it (their BatchNorm statistics stay
fixed too, as ``BaseFinetuning.freeze`` does). The records name the callback (``callbacks``) and it is part
of the run identity, so partial and full finetuning never share a results folder.
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import BaseFinetuning
from torch import nn
from torch.optim import Optimizer


def parameter_layers(encoder: nn.Module) -> list[nn.Module]:
    """The encoder's modules that hold parameters themselves, in definition order (input to output)."""
    return [m for m in encoder.modules() if any(True for _ in m.parameters(recurse=False))]


class PartialFinetune(BaseFinetuning):
    """Train only the last ``trainable_layers`` parameter-holding layers of each trial's encoder (``backbone``).

    Args:
        trainable_layers: Layers at the output end of the encoder that keep learning (the head always does).
    """

    def __init__(self, trainable_layers: int = 2) -> None:
        super().__init__()
        if trainable_layers < 0:
            raise ValueError(f"trainable_layers must be >= 0, got {trainable_layers}")
        self.trainable_layers = trainable_layers

    def frozen_layers(self, pl_module: L.LightningModule) -> list[nn.Module]:
        """The backbone's layers this callback keeps frozen (none when the backbone has no parameters)."""
        layers = parameter_layers(pl_module.backbone)
        return layers[:max(len(layers) - self.trainable_layers, 0)]

    def freeze_before_training(self, pl_module: L.LightningModule) -> None:
        """Freeze the early layers before the trial's optimiser is built."""
        self.freeze(self.frozen_layers(pl_module), train_bn=False)

    def finetune_function(self, pl_module: L.LightningModule, epoch: int, optimizer: Optimizer) -> None:
        """Nothing to unfreeze: the early layers stay frozen for the whole trial."""
