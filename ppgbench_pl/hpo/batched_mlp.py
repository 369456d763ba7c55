"""Many MLP-probe trials trained at once as stacked models: the fast engine of the MLP regime.

The heads of all trials asked together are stacked along a leading trial axis (one stack; narrower
heads are zero-padded to the widest when that at most doubles their work, else one stack per width) and
run with batched matrix products, so per-step overhead (Python, kernel launches) is paid once per stack
instead of once per trial. Each trial keeps everything
it has on its own: init (an :class:`~ppgbench_pl.heads.MLPHead` built under the trial's seed and copied
in), epoch order and batch size (:func:`~ppgbench_pl.hpo.shuffle.epoch_batches`), dropout rate, learning
rate, and AdamW state. Semantics equal the Lightning reference loop (``EncoderTask`` + ``Trainer``) up
to floating-point rounding and dropout masks:

* Trials with different batch sizes move in lockstep over *micro-batches* of g rows, g the greatest
  common divisor of the batch sizes: every trial's batches are whole numbers of micro-batches, so all
  trials see the same number of rows per micro-step and nothing is padded. Gradients accumulate per
  trial, each scaled by its own batch's normaliser (row count, or the sum of class weights for weighted
  cross-entropy, as ``F.cross_entropy`` reduces), and a trial takes its AdamW step (the fused kernel,
  grouped by learning rate) when its batch is complete, so it makes exactly the reference's updates.
* A trial whose loss or validation score turns non-finite stops alone and, as published, completes with its
  best earlier epoch (:func:`~ppgbench_pl.hpo.stacked.finish_diverged`; it fails without one); pruned and
  stopped trials are dropped from the stack.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F
from torch.optim.adamw import adamw

from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import TrialOutcome
from ppgbench_pl.hpo.shuffle import epoch_permutation
from ppgbench_pl.hpo.stacked import finish_diverged

BETAS, EPS = (0.9, 0.999), 1e-8
EVAL_BATCH = 4096


@dataclass(frozen=True)
class HeadConfig:
    """One trial's head and optimiser settings."""

    hidden_dim: int
    dropout: float
    lr: float
    weight_decay: float
    batch_size: int
    seed: int


@dataclass
class HeadData:
    """Training and validation tensors of one holdout, on the device the heads train on.

    Attributes:
        x_fit: Standardised embeddings of the holdout-fit rows ``[N, D]``.
        y_fit: Targets: float ``[N]``/``[N, O]`` (mse), float 0/1 ``[N]`` (bce), class index ``[N]`` (ce).
        x_val: Validation embeddings ``[Nv, D]`` (``None`` for fixed-length training).
        loss: ``mse``, ``bce`` or ``ce``.
        n_outputs: Head outputs.
        class_weight: ``[pos_weight]`` (bce) or per-class weights (ce), or ``None``.

    """

    x_fit: Tensor
    y_fit: Tensor
    x_val: Tensor | None
    loss: str
    n_outputs: int
    class_weight: Tensor | None = None


class StackedHeads:
    """The parameters, gradients and AdamW state of T heads of one hidden width."""

    def __init__(self, configs: Sequence[HeadConfig], in_features: int, n_outputs: int,
                 device: torch.device) -> None:
        states = []
        for config in configs:
            torch.manual_seed(config.seed)
            states.append(MLPHead(in_features, n_outputs, config.hidden_dim, config.dropout).state_dict())
        layout = (("net.0.weight", False), ("net.0.bias", False), ("net.1.weight", True),
                  ("net.1.bias", False), ("net.4.weight", True), ("net.4.bias", False))  # (key, transpose)
        width = max(c.hidden_dim for c in configs)  # narrower heads are zero-padded: padded units stay 0

        def padded(value: Tensor, key: str) -> Tensor:
            if key == "net.1.weight":  # [D, H]
                return F.pad(value, (0, width - value.shape[1]))
            if key == "net.1.bias":
                return F.pad(value, (0, width - value.shape[0]))
            if key == "net.4.weight":  # [H, O]
                return F.pad(value, (0, 0, 0, width - value.shape[0]))
            return value

        self.params = [torch.stack([padded(s[k].T if t else s[k], k) for s in states]).to(device)
                       .requires_grad_() for k, t in layout]
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = torch.zeros(len(configs), len(self.params), device=device)
        self.configs = list(configs)
        self.dropout = torch.tensor([c.dropout for c in configs], device=device)
        self.best = [p.detach().clone() for p in self.params]
        self.fused = device.type in ("cpu", "cuda")  # the fused AdamW kernel exists on these devices
        self._state_views()

    def keep(self, index: Sequence[int]) -> None:
        """Drop every trial not in ``index`` (positions in the stack, order kept)."""
        sel = torch.as_tensor(list(index), dtype=torch.long, device=self.steps.device)
        params = [p.detach().index_select(0, sel).requires_grad_() for p in self.params]
        for new, old in zip(params, self.params, strict=True):
            new.grad = old.grad.index_select(0, sel)  # type: ignore[union-attr]
        self.params = params
        for group in (self.exp_avg, self.exp_avg_sq, self.best):
            group[:] = [p.index_select(0, sel) for p in group]
        self.steps, self.dropout = self.steps[sel], self.dropout[sel]
        self.configs = [self.configs[i] for i in index]
        self._state_views()

    def forward(self, x: Tensor, train: bool) -> Tensor:
        """Outputs ``[T, B, O]`` on per-head rows ``[T, B, D]`` or on rows ``[B, D]`` shared by all heads."""
        ln_w, ln_b, w1, b1, w2, b2 = self.params
        normed = F.layer_norm(x, x.shape[-1:])
        z = (normed if normed.ndim == 3 else normed.unsqueeze(0)) * ln_w[:, None] + ln_b[:, None]
        h = F.gelu(torch.baddbmm(b1[:, None], z, w1))
        if train and bool((self.dropout > 0).any()):
            p = self.dropout[:, None, None]
            h = h * (torch.rand_like(h) >= p).to(h.dtype) / (1 - p)
        return torch.baddbmm(b2[:, None], h, w2)

    @torch.no_grad()
    def evaluate(self, x: Tensor) -> Tensor:
        """Eval-mode outputs ``[T, N, O]`` of every head on the same rows ``[N, D]``, in chunks."""
        chunks = [self.forward(x[i : i + EVAL_BATCH], train=False) for i in range(0, len(x), EVAL_BATCH)]
        return torch.cat(chunks, dim=1)

    def _state_views(self) -> None:
        """Per head: views of its parameters, AdamW moments and step counts (valid until :meth:`keep`)."""
        self.views = [([p[t] for p in self.params], [m[t] for m in self.exp_avg],
                       [v[t] for v in self.exp_avg_sq], [self.steps[t, j] for j in range(len(self.params))])
                      for t in range(len(self.configs))]

    @torch.no_grad()
    def adamw_step(self, trials: Sequence[int]) -> None:
        """One AdamW step of the given heads with their accumulated gradients, which are then zeroed."""
        by_setting: dict[tuple[float, float], list[int]] = {}
        for t in trials:
            by_setting.setdefault((self.configs[t].lr, self.configs[t].weight_decay), []).append(t)
        for (lr, decay), group in by_setting.items():
            params, avgs, sqs, steps, grads = [], [], [], [], []
            for t in group:
                p_t, m_t, v_t, s_t = self.views[t]
                params += p_t
                avgs += m_t
                sqs += v_t
                steps += s_t
                # taken fresh each step: autograd may replace a .grad tensor instead of adding into it
                grads += [p.grad[t] for p in self.params]  # type: ignore[index]
            adamw(params, grads, avgs, sqs, [], steps, fused=self.fused, amsgrad=False, beta1=BETAS[0],
                  beta2=BETAS[1], lr=lr, weight_decay=decay, eps=EPS, maximize=False)
            torch._foreach_zero_(grads)

    @torch.no_grad()
    def remember_best(self, t: int) -> None:
        """Copy head t's current weights as its best."""
        for p, b in zip(self.params, self.best, strict=True):
            b[t].copy_(p[t])

    def head_state(self, t: int, best: bool = True) -> dict[str, Tensor]:
        """Head t's weights as an :class:`MLPHead` state dict, on the CPU."""
        source = self.best if best else self.params
        ln_w, ln_b, w1, b1, w2, b2 = (p[t].detach().cpu().clone() for p in source)
        h = self.configs[t].hidden_dim
        return {"net.0.weight": ln_w, "net.0.bias": ln_b, "net.1.weight": w1[:, :h].T.contiguous(),
                "net.1.bias": b1[:h].contiguous(), "net.4.weight": w2[:h].T.contiguous(), "net.4.bias": b2}


def row_losses(data: HeadData, out: Tensor, y: Tensor) -> Tensor:
    """Per-head sums of per-row losses ``[T]`` (to divide by each batch's normaliser)."""
    if data.loss == "mse":
        return ((out - y.reshape(out.shape)) ** 2).sum((1, 2))
    if data.loss == "bce":
        per = F.binary_cross_entropy_with_logits(out[..., 0], y.to(out.dtype), pos_weight=data.class_weight,
                                                 reduction="none")
        return per.sum(1)
    per = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), weight=data.class_weight,
                          reduction="none")
    return per.view(y.shape).sum(1)


@dataclass
class EpochPlan:
    """One epoch of one stack: micro-batch rows, each batch's loss normaliser, and when heads step."""

    rows: Tensor
    norm: Tensor
    steps: np.ndarray


def plan_epoch(data: HeadData, configs: Sequence[HeadConfig], micro: int, epoch: int) -> EpochPlan:
    """Rows ``[T, M, micro]`` (-1 past the end), normalisers ``[T, M]`` and step flags ``[T, M]``."""
    n = len(data.x_fit)
    n_micro = math.ceil(n / micro)
    rows = np.full((len(configs), n_micro * micro), -1, dtype=np.int64)
    norm = np.zeros((len(configs), n_micro))
    steps = np.zeros((len(configs), n_micro), dtype=bool)
    per_row = _row_weights(data)
    micro_start = np.arange(n_micro) * micro
    for t, config in enumerate(configs):
        order = epoch_permutation(n, config.seed, epoch)
        rows[t, :n] = order
        batch = micro_start // config.batch_size  # every batch is a whole number of micro-batches
        totals = np.add.reduceat(per_row[order], np.arange(0, n, config.batch_size))
        norm[t] = totals[batch]
        steps[t] = ((micro_start + micro) % config.batch_size == 0) | (micro_start + micro >= n)
    device = data.x_fit.device
    return EpochPlan(torch.as_tensor(rows.reshape(len(configs), n_micro, micro), device=device),
                     torch.as_tensor(norm, dtype=data.x_fit.dtype, device=device), steps)


def _row_weights(data: HeadData) -> np.ndarray:
    """Each row's share of its batch normaliser: outputs per row (mse), 1 (bce), its class weight (ce)."""
    n = len(data.x_fit)
    if data.loss == "mse":
        return np.full(n, float(data.n_outputs))
    if data.loss == "ce" and data.class_weight is not None:
        return data.class_weight.cpu().double().numpy()[data.y_fit.cpu().numpy()]
    return np.ones(n)


ScoreFn = Callable[[int, np.ndarray], float]
EpochHook = Callable[[int, int, float], bool]


def train_heads(data: HeadData, configs: Sequence[HeadConfig], epochs: int, score: ScoreFn | None = None,
                on_epoch: EpochHook | None = None) -> list[TrialOutcome]:
    """Train all trials together for up to ``epochs`` epochs, scoring and pruning after each.

    Args:
        data: Training (and validation) tensors.
        configs: One config per trial.
        epochs: Epoch budget.
        score: ``score(trial index, validation outputs [Nv, O])``; ``None`` trains without validation and
            returns the final weights.
        on_epoch: ``on_epoch(trial index, 0-based epoch, best-so-far score)`` reports to the study and
            returns True when the trial should be pruned.

    Returns:
        One outcome per config, in input order (weights: best epoch, or final without validation).

    """
    micro = reduce(math.gcd, (c.batch_size for c in configs))
    # One stack for all widths (narrower heads zero-padded: their padded units get no gradient and stay 0),
    # or one per width when padding would more than double the work.
    widths = sorted({c.hidden_dim for c in configs})
    groups = [widths] if widths[-1] <= 2 * widths[0] else [[w] for w in widths]
    stacks = []
    for group in groups:
        ids = [i for i, c in enumerate(configs) if c.hidden_dim in group]
        stacks.append((StackedHeads([configs[i] for i in ids], data.x_fit.shape[1], data.n_outputs,
                                    data.x_fit.device), ids))
    outcomes: dict[int, TrialOutcome] = {}
    best = {i: (-math.inf, 0) for i in range(len(configs))}
    for epoch in range(epochs):
        diverged = _train_epoch([s for s, _ in stacks], data, micro, epoch)
        for s, ((heads, ids), bad) in enumerate(zip(stacks, diverged, strict=True)):
            keep = []
            for pos, i in enumerate(ids):
                if bad[pos]:
                    outcomes[i] = finish_diverged(i, epoch + 1, epochs, best[i], on_epoch,
                                                  heads.head_state(pos) if best[i][1] else None)
                else:
                    keep.append(pos)
            if score is not None and data.x_val is not None and keep:
                keep = _validate(heads, data.x_val, ids, keep, epoch, epochs, score, on_epoch, best, outcomes)
            if len(keep) < len(ids):
                heads.keep(keep)
                stacks[s] = (heads, [ids[pos] for pos in keep])
        stacks = [(heads, ids) for heads, ids in stacks if ids]
        if not stacks:
            break
    for heads, ids in stacks:
        for pos, i in enumerate(ids):
            value, best_epoch = best[i] if score is not None else (math.nan, epochs)
            outcomes[i] = TrialOutcome("complete", value=value if score is not None else None,
                                       best_epoch=best_epoch, epochs_run=epochs,
                                       weights=heads.head_state(pos, best=score is not None))
    return [outcomes[i] for i in range(len(configs))]


def _train_epoch(stacks: Sequence[StackedHeads], data: HeadData, micro: int, epoch: int) -> list[list[bool]]:
    """One epoch of every stacked trial in micro-batch lockstep; returns the trials with a non-finite loss."""
    plans = [plan_epoch(data, heads.configs, micro, epoch) for heads in stacks]
    bad = [torch.zeros(len(heads.configs), dtype=torch.bool, device=data.x_fit.device) for heads in stacks]
    n, n_micro = len(data.x_fit), plans[0].rows.shape[1]
    for m in range(n_micro):
        width = min(micro, n - m * micro)
        for heads, plan, flags in zip(stacks, plans, bad, strict=True):
            rows = plan.rows[:, m, :width]
            losses = row_losses(data, heads.forward(data.x_fit[rows], train=True), data.y_fit[rows])
            losses = losses / plan.norm[:, m]
            finite = torch.isfinite(losses)
            flags |= ~finite
            torch.where(finite, losses, 0.0).sum().backward()
            stepping = np.flatnonzero(plan.steps[:, m])
            if len(stepping):
                heads.adamw_step(stepping.tolist())
    return [flags.tolist() for flags in bad]


def _validate(heads: StackedHeads, x_val: Tensor, ids: list[int], keep: list[int], epoch: int, epochs: int,
              score: ScoreFn, on_epoch: EpochHook | None, best: dict[int, tuple[float, int]],
              outcomes: dict[int, TrialOutcome]) -> list[int]:
    """Score the kept trials, update best-so-far and best weights, report, prune; returns the survivors."""
    outputs = heads.evaluate(x_val).double().cpu().numpy()
    survivors = []
    for pos in keep:
        i = ids[pos]
        out = outputs[pos]
        value = float(score(i, out)) if np.isfinite(out).all() else math.nan
        if not math.isfinite(value):  # as published: the trial keeps its best earlier epoch
            outcomes[i] = finish_diverged(i, epoch + 1, epochs, best[i], on_epoch,
                                          heads.head_state(pos) if best[i][1] else None)
            continue
        if value > best[i][0]:
            best[i] = (value, epoch + 1)
            heads.remember_best(pos)
        if on_epoch is not None and on_epoch(i, epoch, best[i][0]):
            outcomes[i] = TrialOutcome("pruned", epochs_run=epoch + 1)
            continue
        survivors.append(pos)
    return survivors
