"""Several finetuning trials trained at once as one stacked model on one device (``torch.func``).

The k trials of a group are k copies of the same network (encoder + :class:`~ppgbench_pl.heads.MLPHead`)
whose parameters and buffers are stacked along a leading trial axis (``stack_module_state``) and run with
``vmap(functional_call(...))``: one forward and one backward per step for all of them, so per-step
overhead (Python, the Lightning loop, kernel launches) is paid once per group instead of once per trial.
Each trial keeps what it has on its own:

* init (the caller builds each copy) and hyperparameters: head and encoder learning rates and weight
  decays go into a vectorised AdamW with per-trial values (the same update as ``torch.optim.AdamW``);
* its batches: a group shares the batch size, each trial draws its own epoch order
  (:func:`~ppgbench_pl.hpo.shuffle.epoch_permutation` of its seed), so BatchNorm sees the trial's own
  batch statistics and updates the trial's own running statistics (the stacked buffers);
* dropout: the head's dropout mask is drawn per trial from a generator seeded with the trial's seed, at
  the trial's own rate; dropout inside an encoder draws independently per trial (``randomness="different"``);
* BatchNorm mode: ``train`` or ``freeze_stats`` per trial (:class:`PerTrialBatchNorm` when a stack mixes
  them);
* AMP: autocast in float16 (with a per-trial dynamic loss scale, so a trial that overflows skips its own
  step only) or bfloat16 (no scaling);
* Hyperband: after each epoch every trial is scored, reports its best-so-far value and may be pruned
  alone; pruned trials leave the stack.

A trial whose training loss or validation score becomes non-finite stops training and, as published,
completes with its best earlier epoch (it keeps reporting that value for the remaining epochs, so
Hyperband may still prune it); without any finite epoch it fails.

Inputs are preprocessed once (the encoder's preprocessing is a fixed per-window function, so doing it
on every batch of every epoch gives the same tensors).

Two ways to run a stack (``mode``):

* ``vmap``: the stacked model above; one kernel per layer for all trials, which is what a GPU wants
  (kernel launches and small kernels are its cost). A stack shares a batch size.
* ``interleaved``: each trial keeps its own module and ``torch.optim.AdamW`` (the reference loop's exact
  arithmetic) and the trials of a stack run side by side, epoch by epoch, on a pool of threads with one
  intra-op thread each. On a CPU a small network's kernels are compute-bound and parallelise poorly
  inside one op (2 intra-op threads cost about 2.5x the CPU seconds of one, for no wall-time gain), so
  trial-level parallelism is what pays; trials with different batch sizes share one stack, each drawing
  its own batches and BatchNorm statistics over its own full batch. The threads would draw an encoder's
  dropout masks from torch's one global generator in whatever order they run, so an encoder with
  dropout (or attention dropout) cannot be interleaved reproducibly: ``auto`` takes ``vmap`` for it and
  an explicit ``interleaved`` is refused. Only dropout modules are seen: a custom encoder that calls
  ``F.dropout`` in its ``forward`` must set ``stack_mode: vmap``. The head's masks are per trial in both modes.

``auto`` (default) is ``vmap`` on an accelerator or for an encoder with dropout, else ``interleaved``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn import functional as F

from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import TrialOutcome
from ppgbench_pl.hpo.shuffle import epoch_permutation
from ppgbench_pl.hpo.trial_epochs import EpochHook, ScoreFn, finish_diverged, score_epoch

BETAS, EPS = (0.9, 0.999), 1e-8
StackMode = Literal["auto", "vmap", "interleaved"]
STACK_MODES = ("auto", "vmap", "interleaved")


class HeadedEncoder(nn.Module):
    """Encoder features -> MLP head, with the head's dropout mask given from outside (per trial).

    ``forward`` takes *preprocessed* windows; its state dict has the keys of an
    :class:`~ppgbench_pl.tasks.EncoderTask` (``encoder.*``, ``head.*``).
    """

    def __init__(self, encoder: nn.Module, head: MLPHead) -> None:
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Head outputs; ``mask`` (already divided by 1 - p) replaces the head's own dropout."""
        norm, first, act, drop, last = self.head.net
        h = act(first(norm(self.encoder.forward_features(x))))  # type: ignore[operator]
        return last(drop(h) if mask is None else h * mask)


class PerTrialBatchNorm(nn.Module):
    """A BatchNorm whose mode (``train`` or ``freeze_stats``) is a per-trial flag: mixed modes share a stack.

    It has the parameter and buffer names of the BatchNorm it replaces plus a ``frozen`` flag (a stacked
    buffer: one 0-dim bool per trial under ``vmap``). In training it computes both the batch-statistics and
    the running-statistics output and takes the trial's one; running statistics move only for trials in
    ``train`` mode, as ``set_batchnorm_eval`` does for a single model.
    """

    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor
    frozen: Tensor

    def __init__(self, bn: nn.modules.batchnorm._BatchNorm) -> None:
        super().__init__()
        self.eps, self.momentum = bn.eps, float(bn.momentum or 0.0)
        self.weight, self.bias = bn.weight, bn.bias
        self.register_buffer("running_mean", bn.running_mean)
        self.register_buffer("running_var", bn.running_var)
        self.register_buffer("num_batches_tracked", bn.num_batches_tracked)
        self.register_buffer("frozen", torch.zeros((), dtype=torch.bool, device=bn.weight.device))

    def forward(self, x: Tensor) -> Tensor:
        """Batch statistics for unfrozen trials in training, running statistics otherwise."""
        rm, rv = self.running_mean, self.running_var
        if not self.training:
            return F.batch_norm(x, rm, rv, self.weight, self.bias, False, 0.0, self.eps)
        # the statistics are saved for backward, so the frozen path gets its own copy of them
        frozen_out = F.batch_norm(x, rm.clone(), rv.clone(), self.weight, self.bias, False, 0.0, self.eps)
        new_rm, new_rv = rm.clone(), rv.clone()
        train_out = F.batch_norm(x, new_rm, new_rv, self.weight, self.bias, True, self.momentum, self.eps)
        rm.copy_(torch.where(self.frozen, rm, new_rm))
        rv.copy_(torch.where(self.frozen, rv, new_rv))
        self.num_batches_tracked.add_((~self.frozen).to(self.num_batches_tracked.dtype))
        return torch.where(self.frozen, frozen_out, train_out)


def supports_mixed_batchnorm(net: nn.Module) -> bool:
    """Whether every BatchNorm of ``net`` can become a :class:`PerTrialBatchNorm` (tracked stats)."""
    return all(
        m.track_running_stats and m.momentum is not None and m.affine
        for m in net.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
    )


def _per_trial_batchnorm(module: nn.Module) -> list[str]:
    """Replace BatchNorm children in place (recursively); returns the ``frozen`` buffer names."""
    names = []
    for name, child in list(module.named_modules()):
        for key, sub in list(child.named_children()):
            if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                setattr(child, key, PerTrialBatchNorm(sub))
                names.append(f"{name}.{key}.frozen" if name else f"{key}.frozen")
    return names


@dataclass(frozen=True)
class StackedConfig:
    """One trial's training settings (``lr``/``weight_decay``: head and encoder values)."""

    seed: int
    batch_size: int
    dropout: float
    head_lr: float
    encoder_lr: float
    head_weight_decay: float
    encoder_weight_decay: float


@dataclass
class StackedData:
    """Preprocessed training (and validation) inputs and loss targets of one holdout, on one device."""

    x_fit: Tensor
    y_fit: Tensor
    x_val: Tensor | None
    loss: str
    class_weight: Tensor | None = None


def trial_losses(loss: str, out: Tensor, y: Tensor, class_weight: Tensor | None) -> Tensor:
    """Per-trial mean losses ``[k]`` of outputs ``[k, B, O]``, reduced as in ``EncoderTask.compute_loss``."""
    out = out.float()
    if loss == "mse":
        return ((out.reshape(y.shape) - y.float()) ** 2).flatten(1).mean(1)
    if loss == "bce":
        per = F.binary_cross_entropy_with_logits(
            out.reshape(y.shape), y.float(), pos_weight=class_weight, reduction="none"
        )
        return per.mean(1)
    per = F.cross_entropy(
        out.reshape(-1, out.shape[-1]), y.reshape(-1).long(), weight=class_weight, reduction="none"
    ).view(y.shape)
    if class_weight is None:
        return per.mean(1)
    return per.sum(1) / class_weight[y.long()].sum(1)


class StackedNets:
    """k copies of one network: stacked parameters, buffers, AdamW state and best-epoch snapshots."""

    def __init__(
        self,
        nets: Sequence[nn.Module],
        configs: Sequence[StackedConfig],
        freeze_stats: bool | Sequence[bool],
        device: torch.device,
        head_prefix: str = "head.",
    ) -> None:
        nets = [n.to(device) for n in nets]
        self.base = copy.deepcopy(nets[0]).to("meta")
        self.params, self.buffers = stack_module_state(list(nets))  # type: ignore[arg-type]
        flags = [freeze_stats] * len(nets) if isinstance(freeze_stats, bool) else list(freeze_stats)
        self.flag_names: list[str] = []
        if len(set(flags)) > 1:  # mixed BatchNorm modes: a per-trial flag in every BatchNorm
            self.flag_names = _per_trial_batchnorm(self.base)
            frozen = torch.tensor(flags, dtype=torch.bool, device=device)
            self.buffers.update({name: frozen.clone() for name in self.flag_names})
            flags = [False] * len(nets)
        self.configs, self.freeze_stats, self.device = list(configs), bool(flags[0]), device
        self.head_prefix = head_prefix
        self.exp_avg = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.steps = torch.zeros(len(configs), device=device)
        self.scale = torch.full((len(configs),), 2.0**16, device=device)
        self.growth = torch.zeros(len(configs), device=device)
        self.best = self._snapshot()
        hidden = [m for m in self.base.modules() if isinstance(m, MLPHead)]
        self.hidden_dim = int(hidden[0].net[1].out_features) if hidden else 0  # type: ignore[arg-type]

    # -- bookkeeping -------------------------------------------------------------------------------
    def _snapshot(self) -> dict[str, Tensor]:
        return {k: v.detach().clone() for k, v in {**self.params, **self.buffers}.items()}

    def remember_best(self, t: int) -> None:
        """Copy trial t's current parameters and buffers as its best."""
        with torch.no_grad():
            for k, v in {**self.params, **self.buffers}.items():
                self.best[k][t].copy_(v[t])

    def state(self, t: int, best: bool = True) -> dict[str, Tensor]:
        """Trial t's state dict (best epoch, or current), on the CPU."""
        source = self.best if best else {**self.params, **self.buffers}
        return {k: v[t].detach().cpu().clone() for k, v in source.items() if k not in self.flag_names}

    def keep(self, index: Sequence[int]) -> None:
        """Drop every trial not in ``index`` (positions in the stack, order kept)."""
        sel = torch.as_tensor(list(index), dtype=torch.long, device=self.device)
        self.params = {k: v.detach().index_select(0, sel).requires_grad_() for k, v in self.params.items()}
        for group in (self.buffers, self.exp_avg, self.exp_avg_sq, self.best):
            for k in list(group):
                group[k] = group[k].index_select(0, sel)
        self.steps, self.scale, self.growth = self.steps[sel], self.scale[sel], self.growth[sel]
        self.configs = [self.configs[i] for i in index]

    # -- forward -----------------------------------------------------------------------------------
    def _mode(self, train: bool) -> None:
        self.base.train(train)
        if train and self.freeze_stats:
            for sub in self.base.modules():
                if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                    sub.eval()

    def forward_train(self, x: Tensor, masks: Tensor | None) -> Tensor:
        """Outputs ``[k, B, O]`` of each trial on its own rows ``[k, B, ...]``."""
        self._mode(True)
        base = self.base

        def one(p: dict[str, Tensor], b: dict[str, Tensor], xi: Tensor, mi: Tensor | None) -> Tensor:
            return functional_call(base, (p, b), (xi, mi))

        return vmap(one, in_dims=(0, 0, 0, 0 if masks is not None else None), randomness="different")(
            self.params, self.buffers, x, masks
        )

    @torch.no_grad()
    def evaluate(self, x: Tensor, batch_size: int, autocast: Any = nullcontext) -> Tensor:
        """Eval-mode outputs ``[k, N, O]`` of every trial on the same rows, in chunks."""
        self._mode(False)
        base = self.base

        def one(p: dict[str, Tensor], b: dict[str, Tensor], xi: Tensor) -> Tensor:
            return functional_call(base, (p, b), (xi,))

        outs = []
        for i in range(0, len(x), batch_size):
            with autocast():
                outs.append(
                    vmap(one, in_dims=(0, 0, None))(self.params, self.buffers, x[i : i + batch_size]).float()
                )
        return torch.cat(outs, dim=1)

    # -- optimisation ------------------------------------------------------------------------------
    @torch.no_grad()
    def adamw_step(self, active: Tensor) -> None:
        """One AdamW step (``torch.optim.AdamW`` semantics) of the active trials; then clear gradients."""
        self.steps += active.to(self.steps.dtype)
        every = bool(active.all())
        head_lr = torch.tensor([c.head_lr for c in self.configs], device=self.device)
        enc_lr = torch.tensor([c.encoder_lr for c in self.configs], device=self.device)
        head_wd = torch.tensor([c.head_weight_decay for c in self.configs], device=self.device)
        enc_wd = torch.tensor([c.encoder_weight_decay for c in self.configs], device=self.device)
        step = self.steps.clamp(min=1)
        bc1, bc2_sqrt = 1 - BETAS[0] ** step, (1 - BETAS[1] ** step).sqrt()
        for name, p in self.params.items():
            g = p.grad
            if g is None:
                continue
            head = name.startswith(self.head_prefix)
            shape = (-1,) + (1,) * (p.ndim - 1)
            lr, wd = (head_lr if head else enc_lr).view(shape), (head_wd if head else enc_wd).view(shape)
            m, v = self.exp_avg[name], self.exp_avg_sq[name]
            new_p = p * (1 - lr * wd)
            new_m = m.lerp(g, 1 - BETAS[0])
            new_v = v * BETAS[1] + (1 - BETAS[1]) * g * g
            denom = new_v.sqrt() / bc2_sqrt.view(shape) + EPS
            new_p = new_p - (lr / bc1.view(shape)) * (new_m / denom)
            if every:
                p.copy_(new_p)
                m.copy_(new_m)
                v.copy_(new_v)
            else:
                on = active.view(shape)
                p.copy_(torch.where(on, new_p, p))
                m.copy_(torch.where(on, new_m, m))
                v.copy_(torch.where(on, new_v, v))
            p.grad = None


def _masks(
    gens: Sequence[torch.Generator], rates: Sequence[float], rows: int, hidden: int, device: torch.device
) -> Tensor | None:
    """Per-trial inverted-dropout masks ``[k, rows, hidden]`` (None when no trial drops anything)."""
    if not any(r > 0 for r in rates):
        return None
    out = torch.ones(len(rates), rows, hidden, device=device)
    for t, (gen, rate) in enumerate(zip(gens, rates, strict=True)):
        if rate > 0:
            out[t] = (torch.rand(rows, hidden, generator=gen, device=device) >= rate).float() / (1 - rate)
    return out


def train_stacked(
    nets: Sequence[nn.Module],
    configs: Sequence[StackedConfig],
    data: StackedData,
    epochs: int,
    score: ScoreFn | None = None,
    on_epoch: EpochHook | None = None,
    *,
    freeze_stats: bool | Sequence[bool] = False,
    amp_dtype: torch.dtype | None = None,
    eval_batch_size: int = 4096,
    mode: StackMode = "auto",
    workers: int | None = None,
) -> list[TrialOutcome]:
    """Train trials together, scoring and pruning each after every epoch.

    Args:
        nets: One freshly initialised network per trial (same architecture), e.g. :class:`HeadedEncoder`.
        configs: One config per trial (``vmap``: all with the same ``batch_size``).
        data: Training (and validation) tensors.
        epochs: Epoch budget.
        score: ``score(trial index, validation outputs [Nv, O])``; ``None`` trains without validation and
            returns the final weights.
        on_epoch: ``on_epoch(trial index, 0-based epoch, best-so-far)``; True prunes the trial.
        freeze_stats: BatchNorm layers in eval mode while training (affine parameters still learn), for all
            trials or per trial (mixed modes train in one stack through :class:`PerTrialBatchNorm`).
        amp_dtype: ``torch.float16`` (per-trial loss scaling) or ``torch.bfloat16`` autocast, or None.
        eval_batch_size: Validation batch size.
        mode: ``vmap``, ``interleaved`` or ``auto`` (see the module docstring).
        workers: Threads of the ``interleaved`` mode (default: torch's intra-op threads on a CPU, else 1).

    Returns:
        One outcome per trial, in input order (weights: best epoch, or final without validation).

    """
    device = data.x_fit.device
    encoder = getattr(nets[0], "encoder", nets[0]) if nets else None  # the head's masks are drawn per trial
    if resolve_stack_mode(mode, device, encoder) == "interleaved":
        flags = [freeze_stats] * len(nets) if isinstance(freeze_stats, bool) else list(freeze_stats)
        from ppgbench_pl.hpo.interleaved import TrialRun, train_interleaved  # it builds on this module

        runs = [TrialRun(net, c, f, device, amp_dtype) for net, c, f in zip(nets, configs, flags, strict=True)]
        return train_interleaved(runs, data, epochs, score, on_epoch, eval_batch_size, workers)
    if len({c.batch_size for c in configs}) != 1:
        raise ValueError("a stacked group needs one batch size")
    stack = StackedNets(nets, configs, freeze_stats, device)
    ids = list(range(len(configs)))
    gens = [torch.Generator(device=device).manual_seed(c.seed) for c in configs]
    batch, n = configs[0].batch_size, len(data.x_fit)
    scaled = amp_dtype == torch.float16

    def autocast() -> Any:
        if amp_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=device.type, dtype=amp_dtype)

    best = {i: (-math.inf, 0) for i in ids}
    outcomes: dict[int, TrialOutcome] = {}
    diverged: dict[int, int] = {}  # trial -> epoch (1-based) it went non-finite
    for epoch in range(epochs):
        if not ids:
            break
        orders = torch.as_tensor(
            np.stack([epoch_permutation(n, configs[i].seed, epoch) for i in ids]), device=device
        )
        bad = torch.zeros(len(ids), dtype=torch.bool, device=device)
        for start in range(0, n, batch):
            rows = orders[:, start : start + batch]
            masks = _masks(
                [gens[i] for i in ids],
                [c.dropout for c in stack.configs],
                rows.shape[1],
                stack.hidden_dim,
                device,
            )
            with autocast():
                out = stack.forward_train(data.x_fit[rows], masks)
            losses = trial_losses(data.loss, out, data.y_fit[rows], data.class_weight)
            finite = torch.isfinite(losses)
            bad |= ~finite
            total = torch.where(finite, losses, torch.zeros_like(losses))
            active = ~bad
            if scaled:
                (total * stack.scale).sum().backward()
                active = active & _unscale(stack)
            else:
                total.sum().backward()
            stack.adamw_step(active)
        flags = bad.tolist()
        keep = []
        for pos, i in enumerate(ids):
            if flags[pos]:
                diverged[i] = epoch + 1
                continue
            keep.append(pos)
        if score is not None and data.x_val is not None and keep:
            outputs = stack.evaluate(data.x_val, eval_batch_size, autocast).double().cpu().numpy()
            survivors = []
            for pos in keep:
                i = ids[pos]
                verdict = score_epoch(i, epoch, outputs[pos], score, best, on_epoch,
                                      partial(stack.remember_best, pos))
                if verdict == "diverged":
                    diverged[i] = epoch + 1
                elif verdict == "pruned":
                    outcomes[i] = TrialOutcome("pruned", epochs_run=epoch + 1)
                else:
                    survivors.append(pos)
            keep = survivors
        for pos, i in enumerate(ids):
            if i in diverged and i not in outcomes:
                outcomes[i] = finish_diverged(
                    i, diverged[i], epochs, best[i], on_epoch, stack.state(pos) if best[i][1] else None
                )
        if len(keep) < len(ids):
            stack.keep(keep)
            ids = [ids[pos] for pos in keep]
    for pos, i in enumerate(ids):
        value, best_epoch = best[i] if score is not None else (math.nan, epochs)
        outcomes[i] = TrialOutcome(
            "complete",
            value=value if score is not None else None,
            best_epoch=best_epoch,
            epochs_run=epochs,
            weights=stack.state(pos, best=score is not None),
        )
    return [outcomes[i] for i in range(len(configs))]


def random_modules(module: nn.Module) -> list[str]:
    """Submodules that draw random numbers while training: dropout with p > 0, attention dropout."""
    found = []
    for name, m in module.named_modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            found.append(name or type(m).__name__)
        elif isinstance(m, nn.MultiheadAttention) and m.dropout > 0:
            found.append(name or type(m).__name__)
    return found


def resolve_stack_mode(mode: str, device: torch.device, encoder: nn.Module | None = None) -> StackMode:
    """``vmap`` or ``interleaved``: ``auto`` is ``interleaved`` on the CPU unless ``encoder`` has dropout.

    Raises:
        ValueError: An unknown mode, or ``interleaved`` for an encoder with dropout (its masks would depend
            on thread timing).
    """
    if mode not in STACK_MODES:
        raise ValueError(f"stack mode must be one of {', '.join(STACK_MODES)}, got {mode!r}")
    random = random_modules(encoder) if encoder is not None and mode != "vmap" else []
    if mode == "interleaved" and random:
        shown = ", ".join(random[:3]) + (f" and {len(random) - 3} more" if len(random) > 3 else "")
        raise ValueError(f"stack_mode: interleaved would draw the encoder's dropout masks ({shown}) in thread "
                         "order, so runs would not repeat; use stack_mode: auto or vmap")
    if mode == "interleaved" or (mode == "auto" and device.type == "cpu" and not random):
        return "interleaved"
    return "vmap"


def _unscale(stack: StackedNets) -> Tensor:
    """Divide each trial's gradients by its loss scale; returns which trials' gradients are finite.

    A trial with an overflow skips its step and halves its scale; 2000 clean steps double it (the
    ``GradScaler`` schedule, kept per trial).
    """
    with torch.no_grad():
        finite = torch.ones(len(stack.configs), dtype=torch.bool, device=stack.device)
        for p in stack.params.values():
            if p.grad is None:
                continue
            shape = (-1,) + (1,) * (p.ndim - 1)
            p.grad.div_(stack.scale.view(shape))
            finite &= torch.isfinite(p.grad).flatten(1).all(1)
        stack.scale = torch.where(finite, stack.scale, stack.scale * 0.5)
        stack.growth = torch.where(finite, stack.growth + 1, torch.zeros_like(stack.growth))
        grow = stack.growth >= 2000
        stack.scale = torch.where(grow, stack.scale * 2, stack.scale)
        stack.growth = torch.where(grow, torch.zeros_like(stack.growth), stack.growth)
    return finite
