"""Frozen MLP probe regime (PROTOCOL.md 4.3): heads on embeddings z-scored on the fit part, seeded r + trial."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import optuna
import torch
from torch import Tensor, nn

from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.spaces import MLP_SPACE
from ppgbench_pl.hpo.trial_stack import Slot, SlotData, predict_outputs
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.neural import NeuralRegime, Split, Targets

#: Head setting -> search-space parameter, for the MLP probe's own space.
MLP_PARAMS = {"hidden_dim": "hidden_dim", "dropout": "dropout", "lr": "lr", "weight_decay": "weight_decay",
              "batch_size": "batch_size"}


class HeadFactory:
    """Trials of an :class:`MLPHead` on fixed features (a row per view position); ``param_names``: setting -> param."""

    def __init__(self, features: np.ndarray, labels: np.ndarray, split: Split, targets: Targets,
                 param_names: Mapping[str, str], space: dict[str, list[Any]], make_trainer: Any,
                 eval_batch_size: int = 4096) -> None:
        self.split, self.targets, self.space = split, targets, space
        self.param_names, self.make_trainer, self.eval_batch_size = dict(param_names), make_trainer, eval_batch_size
        x = np.asarray(features, dtype=np.float64)
        fit = x[split.fit]
        mean, std = fit.mean(axis=0), fit.std(axis=0)  # of the fit part; a std of 0 becomes 1
        self.x = torch.as_tensor(((x - mean) / np.where(std == 0, 1.0, std)).astype(np.float32))
        self.labels = labels
        self.details: dict[str, Any] = {"engine": "trial_stack", "standardized": True,
                                        "in_features": int(self.x.shape[1])}
        self._data: dict[bool, SlotData] = {}

    #: The search's study (finetuning replays its head stream with its trials; :class:`NeuralRegime` sets it).
    study: optuna.Study | None = None

    def inputs(self, positions: np.ndarray) -> Tensor:
        """The network's inputs of some positions: the z-scored features (float32, CPU)."""
        return self.x[positions]

    def data(self, validate: bool) -> SlotData:
        """The fit (and validation) rows, one object per factory so they reach the device once."""
        if validate not in self._data:
            fit, val = self.split.fit, self.split.val if validate else None
            self._data[validate] = SlotData(
                self.inputs(fit), torch.as_tensor(self.targets.encode(self.labels[fit])),
                self.inputs(val) if val is not None else None, self.targets.loss, self.targets.class_weight)
        return self._data[validate]

    def for_search(self, seed: int) -> HeadFactory:
        """The factory of another search seed: the same (every trial is seeded by the slot's seed)."""
        return self

    def head(self, params: Mapping[str, Any], seed: int | None) -> MLPHead:
        """A head of the trial's width and dropout, initialised from ``seed`` (None: the caller's RNG)."""
        p = {key: params[name] for key, name in self.param_names.items()}
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            return MLPHead(int(self.x.shape[1]), self.targets.n_outputs, int(p["hidden_dim"]), float(p["dropout"]))

    def slot(self, name: str, params: Mapping[str, Any], seed: int, epochs: int, validate: bool) -> Slot:
        """A head seeded with the trial's seed, its AdamW group and batch size."""
        p = {key: params[n] for key, n in self.param_names.items()}
        head = self.head(params, seed)
        group = {"params": list(head.parameters()), "lr": float(p["lr"]), "weight_decay": float(p["weight_decay"])}
        drops = any(isinstance(m, nn.Dropout) and m.p > 0 for m in head.modules())  # else it draws no random numbers
        return Slot(name, head, self.data(validate), int(p["batch_size"]), seed, [group], epochs, random=drops)

    def network(self, params: Mapping[str, Any]) -> nn.Module:
        """An untrained network of the trial's shape, to load a winner's weights into."""
        return self.head(params, 0)

    def predict(self, params: Mapping[str, Any], weights: dict[str, Any], positions: np.ndarray) -> np.ndarray:
        """Head outputs for some positions (eval mode, through ``Trainer.predict``)."""
        net = self.network(params)
        net.load_state_dict(weights)
        return predict_outputs(self.make_trainer, net, self.inputs(positions), self.eval_batch_size)


class MLPRegime(NeuralRegime):
    """The frozen MLP probe (PROTOCOL.md 4.3: 48 trials, 25 epochs, auroc); arguments: NeuralRegime's."""

    name = "mlp"  # its published auroc, 25 epochs and 1 trial at a time are NeuralRegime's defaults
    default_stack_jobs = 5  # the folds of a seed: one trial at a time per study, so the width comes from jobs

    def make_factory(self, ctx: JobContext, split: Split, targets: Targets, seed: int) -> HeadFactory:
        """Heads on the job's cached embeddings (``RuntimeError`` without them), z-scored on the fit part."""
        make_trainer = partial(ctx.make_trainer, precision=self.precision(ctx))
        return HeadFactory(ctx.features(), ctx.view.y, split, targets, MLP_PARAMS, MLP_SPACE, make_trainer,
                           self.eval_batch_size)
