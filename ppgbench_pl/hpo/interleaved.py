"""The ``interleaved`` stack mode: trials side by side on one-thread workers, each with its own module.

Each trial keeps its own module and ``torch.optim.AdamW`` (head and encoder groups, the reference loop's
exact arithmetic), its own seeded batch order and head-dropout masks, BatchNorm mode and fp16 loss scale.
Every epoch, each live trial trains and validates on a pool of threads with one intra-op thread each;
reports, pruning and divergence are then handled in trial order on the calling thread. Why and when this
mode is chosen: :mod:`ppgbench_pl.hpo.stacked`.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import TrialOutcome
from ppgbench_pl.hpo.shuffle import epoch_permutation
from ppgbench_pl.hpo.stacked import StackedConfig, StackedData, trial_losses
from ppgbench_pl.hpo.trial_epochs import EpochHook, ScoreFn, finish_diverged, score_epoch


class TrialRun:
    """One trial of an ``interleaved`` stack: its module, AdamW (head and encoder groups), batches, masks."""

    def __init__(self, net: nn.Module, config: StackedConfig, frozen: bool, device: torch.device,
                 amp_dtype: torch.dtype | None, head_prefix: str = "head.") -> None:
        self.net, self.config, self.frozen, self.device = net.to(device), config, frozen, device
        named = [(k, p) for k, p in self.net.named_parameters() if p.requires_grad]
        head = [p for k, p in named if k.startswith(head_prefix)]
        encoder = [p for k, p in named if not k.startswith(head_prefix)]
        groups = [{"params": head, "lr": config.head_lr, "weight_decay": config.head_weight_decay},
                  {"params": encoder, "lr": config.encoder_lr, "weight_decay": config.encoder_weight_decay}]
        self.optimizer = torch.optim.AdamW([g for g in groups if g["params"]])
        self.amp_dtype = amp_dtype
        self.scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
        self.gen = torch.Generator(device=device).manual_seed(config.seed)
        hidden = [m for m in self.net.modules() if isinstance(m, MLPHead)]
        self.hidden_dim = int(hidden[0].net[1].out_features) if hidden else 0  # type: ignore[arg-type]
        self.best: dict[str, Tensor] | None = None

    def _autocast(self) -> Any:
        if self.amp_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def _train_mode(self) -> None:
        self.net.train()
        if self.frozen:
            for sub in self.net.modules():
                if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                    sub.eval()

    def train_epoch(self, data: StackedData, epoch: int) -> bool:
        """One epoch over the trial's own batches; False (and the epoch stops) on a non-finite loss."""
        self._train_mode()
        n, batch, rate = len(data.x_fit), self.config.batch_size, self.config.dropout
        order = torch.as_tensor(epoch_permutation(n, self.config.seed, epoch), device=self.device)
        for start in range(0, n, batch):
            rows = order[start : start + batch]
            mask = None
            if rate > 0 and self.hidden_dim:
                draw = torch.rand(len(rows), self.hidden_dim, generator=self.gen, device=self.device)
                mask = (draw >= rate).float() / (1 - rate)
            with self._autocast():
                out = self.net(data.x_fit[rows], mask)
            loss = trial_losses(data.loss, out.unsqueeze(0), data.y_fit[rows].unsqueeze(0), data.class_weight)[0]
            if not bool(torch.isfinite(loss)):
                return False
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return True

    @torch.no_grad()
    def evaluate(self, x: Tensor, batch_size: int) -> np.ndarray:
        """Eval-mode outputs ``[N, O]`` (float64, on the CPU)."""
        self.net.eval()
        outs = []
        for i in range(0, len(x), batch_size):
            with self._autocast():
                outs.append(self.net(x[i : i + batch_size]).float())
        return torch.cat(outs).double().cpu().numpy()

    def state(self) -> dict[str, Tensor]:
        """The current state dict, on the CPU."""
        return {k: v.detach().cpu().clone() for k, v in self.net.state_dict().items()}

    def remember_best(self) -> None:
        """Keep the current weights as the best epoch's."""
        self.best = self.state()


def train_interleaved(runs: list[TrialRun], data: StackedData, epochs: int, score: ScoreFn | None,
                      on_epoch: EpochHook | None, eval_batch_size: int, workers: int | None) -> list[TrialOutcome]:
    """The ``interleaved`` mode: each epoch every live trial trains and scores on a worker thread.

    Reports, pruning and divergence are then handled in trial order on the calling thread.
    """
    ids = list(range(len(runs)))
    validate = score is not None and data.x_val is not None
    x_val = data.x_val
    if workers is None:
        workers = torch.get_num_threads() if data.x_fit.device.type == "cpu" else 1
    workers = max(1, min(workers, len(runs)))

    def work(i: int, epoch: int) -> tuple[bool, np.ndarray | None]:
        if not runs[i].train_epoch(data, epoch):
            return False, None
        return True, runs[i].evaluate(x_val, eval_batch_size) if validate and x_val is not None else None

    threads_before = torch.get_num_threads()
    pool = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,)) if workers > 1 else None
    best = {i: (-math.inf, 0) for i in ids}
    outcomes: dict[int, TrialOutcome] = {}
    try:
        for epoch in range(epochs):
            if not ids:
                break
            epochs_now = [epoch] * len(ids)
            results = list(pool.map(work, ids, epochs_now) if pool is not None else map(work, ids, epochs_now))
            survivors = []
            for i, (finite, outputs) in zip(ids, results, strict=True):
                if finite and outputs is not None and score is not None:
                    verdict = score_epoch(i, epoch, outputs, score, best, on_epoch, runs[i].remember_best)
                    if verdict == "pruned":
                        outcomes[i] = TrialOutcome("pruned", epochs_run=epoch + 1)
                        continue
                    finite = verdict == "kept"
                if not finite:
                    outcomes[i] = finish_diverged(i, epoch + 1, epochs, best[i], on_epoch, runs[i].best)
                    continue
                survivors.append(i)
            ids = survivors
    finally:
        if pool is not None:
            pool.shutdown()
            torch.set_num_threads(threads_before)
    for i in ids:
        value, best_epoch = best[i] if validate else (math.nan, epochs)
        weights = runs[i].best if validate and runs[i].best is not None else runs[i].state()
        outcomes[i] = TrialOutcome("complete", value=value if validate else None, best_epoch=best_epoch,
                                   epochs_run=epochs, weights=weights)
    return [outcomes[i] for i in range(len(runs))]
