"""One trial of a stack (:class:`Slot`) and its rows (:class:`SlotData`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torchmetrics import Metric

LossName = Literal["mse", "bce", "ce"]
SlotState = Literal["training", "diverged", "ended"]


@dataclass
class SlotData:
    """The rows a slot trains and validates on (shared by a study's slots, so they go to the device once)."""

    x_fit: Tensor
    y_fit: Tensor
    x_val: Tensor | None
    loss: LossName
    class_weight: list[float] | None = None
    _device: torch.device | None = field(default=None, repr=False)
    _weights: dict[torch.device, Tensor] = field(default_factory=dict, repr=False)

    def _weight(self, device: torch.device) -> Tensor | None:
        """The class weights as a tensor on ``device`` (built once: a step should not build it again)."""
        if not self.class_weight:
            return None
        if device not in self._weights:
            self._weights[device] = torch.tensor(self.class_weight, device=device)
        return self._weights[device]

    def to(self, device: torch.device, dtype: torch.dtype = torch.float32) -> SlotData:
        """Move the tensors to ``device`` (once); inputs take the networks' dtype (``64-true``, ``bf16-true``)."""
        if self._device != device or self.x_fit.dtype != dtype:
            self.x_fit, self.y_fit = self.x_fit.to(device, dtype), self.y_fit.to(device)
            self.x_val = self.x_val.to(device, dtype) if self.x_val is not None else None
            self._device = device
        return self

    def loss_of(self, out: Tensor, y: Tensor) -> Tensor:
        """MSE, BCE-with-logits (``pos_weight``) or weighted cross-entropy (PROTOCOL.md 4.3)."""
        weight = self._weight(out.device)
        if self.loss == "mse":
            return F.mse_loss(out.float().reshape(y.shape), y.float())
        if self.loss == "bce":
            return F.binary_cross_entropy_with_logits(out.float().reshape(-1), y.float().reshape(-1), pos_weight=weight)
        return F.cross_entropy(out.float(), y.long(), weight=weight)


@dataclass
class Slot:
    """One trial in the stack: ``<study key>/<trial number>``, seeded with r + trial number (order, dropout)."""

    name: str
    net: nn.Module
    data: SlotData
    batch_size: int
    seed: int
    groups: list[dict[str, Any]]
    max_epochs: int
    freeze_stats: bool = False
    owner: Any = None
    epoch: int = 0
    state: SlotState = "training"
    #: 1-based epoch whose training loss went non-finite (the slot stopped training there), or None.
    diverged_at: int | None = None
    #: The selection metric the search reads (a torchmetrics ``Metric`` fed each validation epoch), or None.
    metric: Metric | None = field(default=None, repr=False)
    rng: Tensor | None = field(default=None, repr=False)
    cuda_rng: Tensor | None = field(default=None, repr=False)
    #: Whether the net draws random numbers in training (dropout): False skips the RNG swap per step.
    random: bool = True

    @property
    def training(self) -> bool:
        """Whether the slot takes batches this epoch."""
        return self.state == "training"
