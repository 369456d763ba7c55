"""Trials trained side by side in one LightningModule, each as if alone (own net, rows, RNG; AdamW element-wise)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, IterableDataset, TensorDataset
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


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of ``n`` rows in one epoch of the trial seeded with ``seed``: stacking changes no batch."""
    return np.random.default_rng([seed, epoch]).permutation(n)


class EachEpoch(IterableDataset):
    """Iterates ``make()`` afresh each epoch, so slots added or ended between epochs are seen."""

    def __init__(self, make: Callable[[], Iterator[dict[str, Tensor]]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        return self.make()


class TrialStack(L.LightningModule):
    """The stacked trials of one ``Trainer.fit``; ``slots``: the live table by name (ended ones stay: ``state``)."""

    def __init__(self, slots: list[Slot], eval_batch_size: int = 4096) -> None:
        super().__init__()
        self.nets = nn.ModuleDict()
        self.slots: dict[str, Slot] = {}
        self.eval_batch_size = eval_batch_size
        self.val_outputs: dict[str, list[Tensor]] = {}
        #: The search that drives this fit (``stack_search.StackSearch``), or None for fixed-length slots.
        self.search: Any = None
        for slot in slots:
            self._register(slot)

    def __setattr__(self, name: str, value: Any) -> None:
        """A string or None over a plain attribute is set directly: Lightning sets the hook name ~50 times a step."""
        if (value is None or isinstance(value, str)) and name in self.__dict__:
            self.__dict__[name] = value
        else:
            super().__setattr__(name, value)

    # -- slot table ------------------------------------------------------------------------------
    def _register(self, slot: Slot) -> None:
        if slot.name in self.slots:
            raise ValueError(f"slot {slot.name} is already in the stack")
        self.nets[slot.name.replace(".", "_").replace("/", "__")] = slot.net  # a ModuleDict key has no dots
        self.slots[slot.name] = slot
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(slot.seed)
            slot.rng = torch.random.get_rng_state()
        if torch.cuda.is_available():
            with torch.random.fork_rng(devices=[torch.cuda.current_device()]):
                torch.cuda.manual_seed(slot.seed)
                slot.cuda_rng = torch.cuda.get_rng_state()

    def optimizer(self) -> torch.optim.Optimizer | None:
        """The fit's AdamW, or None outside a fit."""
        try:
            optimizers = self.trainer.optimizers
        except RuntimeError:  # not attached to a trainer
            return None
        return optimizers[0] if optimizers else None

    def add_slot(self, slot: Slot) -> None:
        """Add a trial between epochs: its net goes to the module's device, its groups to the optimiser."""
        self._register(slot)
        dtype = torch.get_default_dtype() if isinstance(self.dtype, str) else self.dtype
        slot.net.to(self.device, dtype)
        slot.data.to(self.device, dtype)
        optimizer = self.optimizer()
        if optimizer is not None:
            for group in slot.groups:
                optimizer.add_param_group(dict(group))

    def end_slot(self, slot: Slot) -> None:
        """Stop training a slot and release its optimiser state (its net stays readable until the fit ends)."""
        slot.state = "ended"
        optimizer = self.optimizer()
        if optimizer is not None:
            params = {id(p) for p in slot.net.parameters()}
            optimizer.param_groups[:] = [g for g in optimizer.param_groups
                                         if not any(id(p) in params for p in g["params"])]
            for p in slot.net.parameters():
                optimizer.state.pop(p, None)
        slot.net.requires_grad_(False)

    def active(self) -> list[Slot]:
        """Slots not ended yet (training or diverged), in insertion order."""
        return [s for s in self.slots.values() if s.state != "ended"]

    # -- Lightning -------------------------------------------------------------------------------
    def configure_optimizers(self) -> torch.optim.Optimizer:
        """One AdamW, one group per slot part: element-wise, so each slot updates as if it were alone."""
        groups = [dict(g) for slot in self.slots.values() if slot.training for g in slot.groups]
        # fused: one kernel per group; x1.3 CPU over foreach=True on the MLP bench, paired runs (docs/performance.md)
        return torch.optim.AdamW(groups, fused=True)

    def train_dataloader(self) -> DataLoader:
        """Per-slot row indices of each step (in memory: no workers)."""
        return DataLoader(EachEpoch(self.train_steps), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        """Per-slot validation chunks."""
        return DataLoader(EachEpoch(self.validation_chunks), batch_size=None)

    def train_steps(self) -> Iterator[dict[str, Tensor]]:
        """One epoch: per step, ``{slot name: row indices}`` for every training slot with a batch left."""
        plans = {}
        for slot in self.slots.values():
            if slot.training:
                order = torch.as_tensor(epoch_permutation(len(slot.data.y_fit), slot.seed, slot.epoch))
                plans[slot.name] = list(order.split(slot.batch_size))
        for step in range(max((len(p) for p in plans.values()), default=0)):
            yield {name: batches[step] for name, batches in plans.items() if step < len(batches)}

    def validation_chunks(self) -> Iterator[dict[str, Tensor]]:
        """Validation rows of every training slot in chunks: ``{slot name: (start, stop)}``."""
        size = self.eval_batch_size
        for slot in self.slots.values():
            if slot.training and slot.data.x_val is not None:
                n = len(slot.data.x_val)
                for start in range(0, n, size):
                    yield {slot.name: torch.tensor([start, min(start + size, n)])}

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """A batch is a flat ``{slot name: index tensor}``: move it directly (the generic walk costs more)."""
        return {name: index.to(device) for name, index in batch.items()}

    def on_fit_start(self) -> None:
        """Move every slot's rows to the training device; refuse a trainer without a neural regime callback."""
        if not any(callable(getattr(cb, "train_modes", None)) for cb in getattr(self.trainer, "callbacks", [])):
            raise RuntimeError("TrialStack: its Trainer needs a neural regime callback (e.g. callbacks=[MLPRegime()]),"
                               " which ends the trials and sets their train/eval and BatchNorm modes")
        dtype = torch.get_default_dtype() if isinstance(self.dtype, str) else self.dtype
        for slot in self.slots.values():
            slot.data.to(self.device, dtype)

    @property
    def epoch_slots(self) -> list[str]:
        """Names of the slots that train now (what a user callback reads per trial, from any hook)."""
        return [s.name for s in self.slots.values() if s.training]

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        """Each slot's loss on its own batch, summed; a slot whose loss is not finite stops here (``diverged``)."""
        total: Tensor | None = None
        for name, index in batch.items():
            slot = self.slots[name]
            if not slot.training:
                continue
            with self.slot_rng(slot) if slot.random else contextlib.nullcontext():
                out = slot.net(slot.data.x_fit[index])
            loss = slot.data.loss_of(out, slot.data.y_fit[index])
            if not torch.isfinite(loss.detach()):
                slot.state, slot.diverged_at = "diverged", slot.epoch + 1
                slot.net.requires_grad_(False)
                continue
            total = loss if total is None else total + loss
        return total  # not logged per step: Lightning's logging costs more than a small head's step

    def on_validation_epoch_start(self) -> None:
        """Start this epoch's validation outputs (and reset each slot's selection metric)."""
        self.val_outputs = {}
        for slot in self.slots.values():
            if slot.metric is not None:
                slot.metric.reset()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Outputs of one chunk of one slot's validation rows (eval mode)."""
        ((name, bounds),) = batch.items()
        slot = self.slots[name]
        assert slot.data.x_val is not None
        start, stop = (int(v) for v in bounds)
        out = slot.net(slot.data.x_val[start:stop])
        if slot.metric is not None:
            slot.metric.update(out)
        else:
            self.val_outputs.setdefault(name, []).append(out.detach().float().cpu())

    @contextlib.contextmanager
    def slot_rng(self, slot: Slot) -> Iterator[None]:
        """Run with the global RNG at the slot's own state (its dropout masks), then keep the new state."""
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            assert slot.rng is not None
            torch.random.set_rng_state(slot.rng)
            if devices and slot.cuda_rng is not None:
                torch.cuda.set_rng_state(slot.cuda_rng, devices[0])
            yield
            slot.rng = torch.random.get_rng_state()
            if devices:
                slot.cuda_rng = torch.cuda.get_rng_state(devices[0])


class PredictModule(L.LightningModule):
    """One network's outputs over some rows, through ``Trainer.predict`` (device and precision from the trainer)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def predict_step(self, batch: list[Tensor], batch_idx: int, dataloader_idx: int = 0) -> Tensor:
        """Head outputs of a chunk, on the CPU."""
        return self.net(batch[0].to(self.dtype)).detach().float().cpu()


def predict_outputs(make_trainer: Callable[..., L.Trainer], net: nn.Module, x: Tensor,
                    batch_size: int) -> np.ndarray:
    """Eval-mode outputs of ``net`` on ``x`` in chunks, through the run's trainer settings."""
    net.eval()
    loader = DataLoader(TensorDataset(x), batch_size=batch_size)
    batches: Any = make_trainer([]).predict(PredictModule(net), loader)
    return torch.cat(batches).numpy()
