"""Many MLP-probe trials trained at once as stacked models: the fast engine of the MLP regime.

Trials of one batch size and width are stacked along a leading trial axis and trained in lockstep with
batched matrix products (on a GPU narrower heads join a wider stack, zero-padded, see :func:`stack_ids`),
so per-step overhead is paid once per stack instead of once per trial, and no trial ever runs at another
trial's batch size. The loop has no autograd: the forward and backward passes
of LayerNorm -> Linear -> GELU -> Dropout -> Linear are written out (the input's normalisation, which has
no parameters, is computed once), gradients land in preallocated buffers, and every stack takes one fused
AdamW step per (learning rate, weight decay) group. Each trial keeps everything it has on its own: init
(an :class:`~ppgbench_pl.heads.MLPHead` built under the trial's seed and copied in), epoch order and
batch size (:func:`~ppgbench_pl.hpo.shuffle.epoch_permutation`), dropout rate and masks, learning rate,
AdamW state, reports and pruning. Semantics equal the Lightning reference loop (``EncoderTask`` +
``Trainer``) up to floating-point rounding and dropout masks:

* A batch's loss is normalised as ``F.mse_loss`` / ``F.binary_cross_entropy_with_logits`` /
  ``F.cross_entropy`` reduce it (elements; rows; the sum of class weights of weighted cross-entropy).
* Dropout masks come from the trial's own random stream (seed, epoch), drawn for a whole epoch at once, so
  a trial trained in a stack equals the same trial trained alone, dropout included. The keep probability is
  ``1 - p`` to 2^-32.
* A trial whose loss or validation score turns non-finite stops alone and, as published, completes with its
  best earlier epoch (:func:`~ppgbench_pl.hpo.trial_epochs.finish_diverged`; it fails without one); pruned and
  stopped trials are dropped from their stack. After every epoch all trials are validated, then reported to
  the study in input order, whatever stacks they train in.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F
from torch.optim.adamw import adamw

from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import TrialOutcome
from ppgbench_pl.hpo.shuffle import epoch_permutation
from ppgbench_pl.hpo.trial_epochs import EpochHook, ScoreFn, finish_diverged, score_epoch

BETAS, EPS = (0.9, 0.999), 1e-8
#: Elements of one [heads, rows, width] activation in evaluation, and of a training chunk's gathered rows.
EVAL_ELEMENTS = CHUNK_ELEMENTS = 1 << 23
LN_EPS = 1e-5  # nn.LayerNorm's default, as in MLPHead
#: Batches of at most this many rows take the input gradient as (w1 @ da^T)^T.
SMALL_BATCH = 32
#: Activations ([heads, rows, width] elements) up to which a CPU epoch runs ATen's GELU kernels, not oneDNN's.
SMALL_ACTIVATION = 1 << 15
#: Tags a trial's dropout stream apart from its shuffling stream (both seeded by (seed, epoch)).
DROPOUT_STREAM = 0xD0
#: (state-dict key, stored transposed) of MLPHead's parameters, in the stacks' order.
LAYOUT = (("net.0.weight", False), ("net.0.bias", False), ("net.1.weight", True), ("net.1.bias", False),
          ("net.4.weight", True), ("net.4.bias", False))


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


class DropoutStream:
    """One trial's dropout masks over one epoch, drawn chunk by chunk: 0 or ``1 / (1 - p)`` per unit.

    Row j of the epoch's masks belongs to its j-th training row (in shuffled order). 32 random bits per
    unit from the trial's own stream (seeded by (seed, epoch)): several times cheaper than ``torch.rand``,
    independent of stack mates, and the same whatever the chunk sizes (as long as they are even but the
    last).
    """

    def __init__(self, seed: int, epoch: int, width: int, p: float) -> None:
        self.width, self.scale = width, np.float32(1.0 / (1.0 - p))
        self.threshold = np.int32(round(p * 2.0**32) - 2**31)  # P(bits >= threshold) = 1 - p
        self.bits = np.random.SFC64(np.random.SeedSequence([seed, epoch, DROPOUT_STREAM]))

    def next(self, rows: int, out: np.ndarray | None = None) -> np.ndarray:
        """Masks of the next ``rows`` rows, ``[rows, width]`` float32 (written to ``out`` if given)."""
        count = rows * self.width
        bits = self.bits.random_raw((count + 1) // 2).view(np.int32)[:count].reshape(rows, self.width)
        if out is None:
            out = np.empty((rows, self.width), dtype=np.float32)
        np.greater_equal(bits, self.threshold, out=out, casting="unsafe")
        out *= self.scale
        return out


@dataclass
class EpochPlan:
    """One epoch of one stack: each trial's row order ``[T, N]`` and each row's loss factor ``[T, N]``.

    The factor is 1 / the normaliser of the row's batch (see :func:`plan_epoch`).
    """

    rows: Tensor
    scale: Tensor


def plan_epoch(data: HeadData, configs: Sequence[HeadConfig], epoch: int) -> EpochPlan:
    """Row orders (:func:`epoch_permutation`) and per-row loss factors of trials sharing a batch size."""
    n = len(data.x_fit)
    per_row = _row_weights(data)
    rows = np.empty((len(configs), n), dtype=np.int64)
    scale = np.empty((len(configs), n))
    for t, config in enumerate(configs):
        order = epoch_permutation(n, config.seed, epoch)
        starts = np.arange(0, n, config.batch_size)
        totals = np.add.reduceat(per_row[order], starts)
        rows[t] = order
        scale[t] = np.repeat(1.0 / totals, np.diff(np.append(starts, n)))
    device = data.x_fit.device
    return EpochPlan(torch.as_tensor(rows, device=device),
                     torch.as_tensor(scale, dtype=data.x_fit.dtype, device=device))


def _row_weights(data: HeadData) -> np.ndarray:
    """Each row's share of its batch normaliser: outputs per row (mse), 1 (bce), its class weight (ce)."""
    n = len(data.x_fit)
    if data.loss == "mse":
        return np.full(n, float(data.n_outputs))
    if data.loss == "ce" and data.class_weight is not None:
        return data.class_weight.cpu().double().numpy()[data.y_fit.cpu().numpy()]
    return np.ones(n)


class LossTargets:
    """One epoch's targets of a stack in row order, pre-multiplied by the rows' loss factors.

    :meth:`grad` turns a batch's outputs into the loss gradient and a number that is finite exactly when the
    batch's loss is: the loss sum (mse), or the sum of the outputs (bce, ce: with finite targets their
    losses are finite exactly when the outputs are), so the check costs one reduction. (A sum of finite
    outputs overflows only beyond 3e38 / rows, where a head has long diverged.)
    """

    def __init__(self, data: HeadData, plan: EpochPlan) -> None:
        self.loss = data.loss
        y = data.y_fit[plan.rows]  # [T, N] or [T, N, O]
        scale = plan.scale[..., None]  # [T, N, 1]
        weight = data.class_weight
        self.tensors: tuple[Tensor, ...]
        if self.loss == "mse":
            self.tensors = (y.reshape(*plan.rows.shape, data.n_outputs).to(data.x_fit.dtype), 2 * scale)
        elif self.loss == "bce":
            y = y.to(data.x_fit.dtype)[..., None]
            pos = y * weight if weight is not None else y  # d(loss)/d(out) = sigmoid * (pos + 1 - y) - pos
            self.tensors = (-pos * scale, (pos + 1 - y) * scale)
        else:
            row_weight = weight[y][..., None] if weight is not None else 1.0
            self.tensors = (F.one_hot(y, data.n_outputs).to(data.x_fit.dtype), row_weight * scale)

    def batches(self, start: int, stop: int, size: int) -> list[tuple[Tensor, ...]]:
        """The targets of rows ``start:stop`` in batches of ``size`` rows (views)."""
        return list(zip(*(t[:, start:stop].split(size, dim=1) for t in self.tensors), strict=True))

    def grad(self, out: Tensor, batch: tuple[Tensor, ...], check: Tensor) -> Tensor:
        """d(loss)/d(out) ``[T, b, O]`` of one batch; the finiteness check per trial goes to ``check[T]``."""
        first, second = batch
        if self.loss == "mse":
            diff = out - first
            torch.sum(diff.square(), (1, 2), out=check)
            return diff.mul_(second)
        torch.sum(out, (1, 2), out=check)
        if self.loss == "bce":
            return torch.addcmul(first, torch.sigmoid(out), second)
        return torch.softmax(out, dim=-1).sub_(first).mul_(second)


class StackedHeads:
    """T heads of one batch size: stacked parameters, gradients, AdamW moments and one step count.

    Heads with dropout come first (the masks cover only them); narrower heads are zero-padded to the
    widest, and their padded units get no gradient and stay 0.
    """

    def __init__(self, configs: Sequence[HeadConfig], in_features: int, n_outputs: int,
                 device: torch.device) -> None:
        if len({c.batch_size for c in configs}) != 1:
            raise ValueError("a stack trains heads of one batch size")
        self.k = sum(c.dropout > 0 for c in configs)
        if any(c.dropout > 0 for c in configs[self.k:]):
            raise ValueError("heads with dropout come first in a stack")
        self.width = max(c.hidden_dim for c in configs)
        states = []
        for config in configs:
            torch.manual_seed(config.seed)
            states.append(MLPHead(in_features, n_outputs, config.hidden_dim, config.dropout).state_dict())
        self.params = [torch.stack([self._padded(s[k].T if t else s[k], k) for s in states]).to(device)
                       for k, t in LAYOUT]
        self.grads = [torch.zeros_like(p) for p in self.params]
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.step = torch.zeros((), device=device)  # the heads of a stack always step together
        self.best = [p.clone() for p in self.params]
        self.configs = list(configs)
        self.fused = device.type in ("cpu", "cuda")  # the fused AdamW kernel exists on these devices
        self._optimizer_groups()

    def _padded(self, value: Tensor, key: str) -> Tensor:
        if key == "net.1.weight":  # [D, H]
            return F.pad(value, (0, self.width - value.shape[1]))
        if key == "net.1.bias":
            return F.pad(value, (0, self.width - value.shape[0]))
        if key == "net.4.weight":  # [H, O]
            return F.pad(value, (0, 0, 0, self.width - value.shape[0]))
        return value

    @property
    def batch_size(self) -> int:
        """The stack's batch size."""
        return self.configs[0].batch_size

    def keep(self, index: Sequence[int]) -> None:
        """Drop every head not in ``index`` (positions in the stack, order kept)."""
        sel = torch.as_tensor(list(index), dtype=torch.long, device=self.step.device)
        for group in (self.params, self.grads, self.exp_avg, self.exp_avg_sq, self.best):
            group[:] = [p.index_select(0, sel) for p in group]
        self.configs = [self.configs[i] for i in index]
        self.k = sum(c.dropout > 0 for c in self.configs)
        self._optimizer_groups()

    def _optimizer_groups(self) -> None:
        """Per (lr, weight decay): the fused AdamW kernel's tensor lists and options.

        Also the parameters' broadcast views the steps use (all valid until :meth:`keep`: parameters only
        change in place).
        """
        ln_w, ln_b, w1, b1, w2, b2 = self.params
        self._views = (ln_w[:, None], ln_b[:, None], w1, b1[:, None], w2, b2[:, None], w1.transpose(1, 2),
                       w2.transpose(1, 2))
        by_setting: dict[tuple[float, float], list[int]] = {}
        for t, config in enumerate(self.configs):
            by_setting.setdefault((config.lr, config.weight_decay), []).append(t)
        self.groups: list[tuple[list[list[Tensor]], dict[str, Any]]] = []
        for (lr, decay), heads in by_setting.items():
            tensors = (self.params, self.grads, self.exp_avg, self.exp_avg_sq)
            if len(heads) == len(self.configs):
                lists = [list(group) for group in tensors]
            else:
                lists = [[p[t] for t in heads for p in group] for group in tensors]
            lists += [[], [self.step] * len(lists[0])]  # no max_exp_avg_sqs; one step count for the stack
            options = {"lr": lr, "beta1": BETAS[0], "beta2": BETAS[1], "weight_decay": decay, "eps": EPS,
                       "amsgrad": False, "maximize": False}
            self.groups.append((lists, options))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Eval-mode pass on normalised rows ``[T, B, D]`` (or ``[1, B, D]`` shared): (z, a, g, outputs)."""
        ln_w, ln_b, w1, b1, w2, b2 = self.params
        z = torch.addcmul(ln_b[:, None], x, ln_w[:, None])
        a = torch.baddbmm(b1[:, None], z, w1)
        g = F.gelu(a)
        return z, a, g, torch.baddbmm(b2[:, None], g, w2)

    @torch.no_grad()
    def evaluate(self, x: Tensor) -> Tensor:
        """Eval-mode outputs ``[T, N, O]`` of every head on the same normalised rows ``[N, D]``, in chunks."""
        step = max(1, EVAL_ELEMENTS // (len(self.configs) * self.width))
        chunks = [self.forward(x[None, i : i + step])[3] for i in range(0, len(x), step)]
        return torch.cat(chunks, dim=1)

    @torch.no_grad()
    def train_epoch(self, x: Tensor, data: HeadData, epoch: int) -> list[bool]:
        """One epoch on normalised training rows ``x`` ``[N, D]``; returns which heads had a non-finite loss.

        Rows and dropout masks are gathered per chunk of whole batches (one chunk at the bench's size),
        bounded in memory, and split into per-batch views in one call each.
        """
        plan = plan_epoch(data, self.configs, epoch)
        targets = LossTargets(data, plan)
        n, size, heads = x.shape[0], self.batch_size, len(self.configs)
        per_row = heads * (x.shape[1] + (self.width if self.k else 0))
        chunk = max(1, CHUNK_ELEMENTS // (per_row * size * 2)) * size * 2  # whole batches, an even count
        streams = [DropoutStream(c.seed, epoch, c.hidden_dim, c.dropout) for c in self.configs[: self.k]]
        checks = torch.empty(math.ceil(n / size), heads, dtype=x.dtype, device=x.device)
        check_rows = iter(checks.unbind(0))
        # On a CPU, oneDNN's GELU kernels cost a fixed ~10-25 us a call: ATen's own are cheaper on small batches.
        onednn = bool(torch.backends.mkldnn.enabled)
        small = x.device.type == "cpu" and heads * size * self.width <= SMALL_ACTIVATION
        try:
            torch.backends.mkldnn.enabled = onednn and not small  # type: ignore[assignment]
            self._train_chunks(x, plan, targets, streams, chunk, check_rows)
        finally:
            torch.backends.mkldnn.enabled = onednn  # type: ignore[assignment]
        return (~torch.isfinite(checks).all(0)).tolist()

    def _train_chunks(self, x: Tensor, plan: EpochPlan, targets: LossTargets, streams: list[DropoutStream],
                      chunk: int, check_rows: Iterator[Tensor]) -> None:
        """The epoch's steps, a chunk of ``chunk`` rows at a time (gathered rows and masks split per batch)."""
        n, size = x.shape[0], self.batch_size
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            xs = x[plan.rows[:, start:stop]].split(size, dim=1)  # every head's rows in its own order
            masks: Sequence[Tensor | None] = [None] * len(xs)
            if streams:
                drawn = np.zeros((self.k, stop - start, self.width), dtype=np.float32)  # padded units: 0
                for stream, into in zip(streams, drawn, strict=True):
                    stream.next(stop - start, out=into[:, : stream.width])
                masks = torch.from_numpy(drawn).to(x.device).split(size, dim=1)
            for xb, mask, batch in zip(xs, masks, targets.batches(start, stop, size), strict=True):
                self._step(xb, mask, targets, batch, next(check_rows))

    def _step(self, x: Tensor, mask: Tensor | None, targets: LossTargets, batch: tuple[Tensor, ...],
              check: Tensor) -> None:
        """Forward, backward and AdamW step of every head on its batch ``x`` ``[T, b, D]``."""
        ln_w, ln_b, w1, b1, w2, b2, w1_t, w2_t = self._views
        g_lnw, g_lnb, g_w1, g_b1, g_w2, g_b2 = self.grads
        z = torch.addcmul(ln_b, x, ln_w)
        a = torch.baddbmm(b1, z, w1)
        g = F.gelu(a)
        if mask is not None:
            (g if self.k == len(self.configs) else g[: self.k]).mul_(mask)
        dout = targets.grad(torch.baddbmm(b2, g, w2), batch, check)  # [T, b, O]
        torch.bmm(g.transpose(1, 2), dout, out=g_w2)
        torch.sum(dout, 1, out=g_b2)
        dg = dout * w2_t if dout.shape[2] == 1 else torch.bmm(dout, w2_t)
        if mask is not None:
            (dg if self.k == len(self.configs) else dg[: self.k]).mul_(mask)
        da = torch.ops.aten.gelu_backward(dg, a)
        torch.bmm(z.transpose(1, 2), da, out=g_w1)
        torch.sum(da, 1, out=g_b1)
        if x.shape[1] <= SMALL_BATCH:  # [T, D, b]: for few rows about twice as fast as da @ w1^T on a CPU
            dz_t = torch.bmm(w1, da.transpose(1, 2))
            torch.sum(dz_t, 2, out=g_lnb)
            torch.sum(dz_t.mul_(x.transpose(1, 2)), 2, out=g_lnw)
        else:
            dz = torch.bmm(da, w1_t)
            torch.sum(dz, 1, out=g_lnb)
            torch.sum(dz.mul_(x), 1, out=g_lnw)
        self.step.add_(1)
        for lists, options in self.groups:
            if self.fused:
                torch._fused_adamw_(*lists, **options)
            else:  # adamw() advances the step counts itself
                params, grads, avgs, sqs = lists[:4]
                steps = [torch.tensor(float(self.step) - 1.0) for _ in params]
                adamw(params, grads, avgs, sqs, [], steps, foreach=False, amsgrad=False, beta1=BETAS[0],
                      beta2=BETAS[1], lr=options["lr"], weight_decay=options["weight_decay"], eps=EPS,
                      maximize=False)

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


def stack_ids(configs: Sequence[HeadConfig], pad_widths: bool = False) -> list[list[int]]:
    """Which trials train together, heads with dropout first, input order otherwise.

    One stack per (batch size, width). With ``pad_widths``, narrower heads join the widest one's stack,
    zero-padded, when that at most doubles their work: fewer, larger steps, the better choice where steps
    are launch-bound (a GPU); on a CPU, where they are compute-bound, padding costs more than it saves.
    """
    widths = sorted({c.hidden_dim for c in configs})
    merge = pad_widths and widths[-1] <= 2 * widths[0]
    stacks: dict[tuple[int, int], list[int]] = {}
    for i, c in enumerate(configs):
        stacks.setdefault((c.batch_size, 0 if merge else c.hidden_dim), []).append(i)
    return [sorted(ids, key=lambda i: configs[i].dropout == 0) for _, ids in sorted(stacks.items())]


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
    dim = data.x_fit.shape[1]
    x_fit = F.layer_norm(data.x_fit, (dim,), eps=LN_EPS)  # LayerNorm's parameter-free part, once
    validate = score is not None and data.x_val is not None
    x_val = F.layer_norm(data.x_val, (dim,), eps=LN_EPS) if validate and data.x_val is not None else None
    stacks = [(StackedHeads([configs[i] for i in ids], dim, data.n_outputs, data.x_fit.device), ids)
              for ids in stack_ids(configs, pad_widths=data.x_fit.device.type != "cpu")]
    outcomes: dict[int, TrialOutcome] = {}
    best = {i: (-math.inf, 0) for i in range(len(configs))}
    for epoch in range(epochs):
        diverged = [heads.train_epoch(x_fit, data, epoch) for heads, _ in stacks]
        outputs = [heads.evaluate(x_val).double().cpu().numpy() if x_val is not None else None
                   for heads, _ in stacks]
        where = {i: (s, pos) for s, (_, ids) in enumerate(stacks) for pos, i in enumerate(ids)}
        dropped: set[int] = set()
        for i in sorted(where):  # report in input order, whatever the stacks
            s, pos = where[i]
            heads = stacks[s][0]
            if diverged[s][pos]:
                outcomes[i] = finish_diverged(i, epoch + 1, epochs, best[i], on_epoch,
                                              heads.head_state(pos) if best[i][1] else None)
                dropped.add(i)
            elif score is not None and x_val is not None:
                verdict = score_epoch(i, epoch, outputs[s][pos], score, best, on_epoch,  # type: ignore[index]
                                      partial(heads.remember_best, pos))
                if verdict == "diverged":  # as published: the trial keeps its best earlier epoch
                    outcomes[i] = finish_diverged(i, epoch + 1, epochs, best[i], on_epoch,
                                                  heads.head_state(pos) if best[i][1] else None)
                    dropped.add(i)
                elif verdict == "pruned":
                    outcomes[i] = TrialOutcome("pruned", epochs_run=epoch + 1)
                    dropped.add(i)
        if dropped:
            kept = []
            for heads, ids in stacks:
                keep = [pos for pos, i in enumerate(ids) if i not in dropped]
                if keep and len(keep) < len(ids):
                    heads.keep(keep)
                if keep:
                    kept.append((heads, [ids[pos] for pos in keep]))
            stacks = kept
        if not stacks:
            break
    for heads, ids in stacks:
        for pos, i in enumerate(ids):
            value, best_epoch = best[i] if score is not None else (math.nan, epochs)
            outcomes[i] = TrialOutcome("complete", value=value if score is not None else None,
                                       best_epoch=best_epoch, epochs_run=epochs,
                                       weights=heads.head_state(pos, best=score is not None))
    return [outcomes[i] for i in range(len(configs))]
