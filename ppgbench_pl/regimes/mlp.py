"""Frozen MLP probe regime: a one-hidden-layer head on cached embeddings, Optuna-searched (PROTOCOL.md 4.3).

The encoder is never run here: heads train on the cached frozen embeddings of the job's windows,
z-scored with the holdout-fit part's mean and std (a std of 0 becomes 1). Two engines train the trials
and select the same way:

* ``batched`` (default): the trials asked together train as stacked models, one per batch size
  (:mod:`ppgbench_pl.hpo.batched_mlp`), with the backward pass written out and no Lightning loop (a
  12-trial search costs about a third of the CPU time of the first landing's, one trial at a time as
  published; ``tools/bench_mlp.py``).
* ``lightning``: the reference, one ``Trainer.fit`` of :class:`~ppgbench_pl.tasks.EncoderTask` per trial
  with optuna-integration's pruning callback. Given the same trial seed both see the same init and
  batches; the batched engine is tested against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import lightning as L
import numpy as np
import optuna
import torch
from lightning.pytorch.callbacks import Callback
from torch import nn
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.batched_mlp import HeadConfig, HeadData, train_heads
from ppgbench_pl.hpo.lightning_trial import fit_trial, frozen_parts_expected
from ppgbench_pl.hpo.optuna_search import SearchSettings, TrialOutcome
from ppgbench_pl.hpo.shuffle import EpochPermutationSampler
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, MLP_SPACE
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.neural import ClassWeighting, NeuralRegime, SelectionScorer, Split, Targets
from ppgbench_pl.tasks.encoder_task import EncoderTask

Engine = Literal["batched", "lightning"]
TrainerFactory = Callable[..., L.Trainer]
#: Head setting -> search-space parameter, for the MLP probe's own space.
MLP_PARAMS = {"hidden_dim": "hidden_dim", "dropout": "dropout", "lr": "lr", "weight_decay": "weight_decay",
              "batch_size": "batch_size"}


def head_state(module: L.LightningModule) -> dict[str, torch.Tensor]:
    """A CPU copy of the head's weights (the only trained part of a frozen-probe task)."""
    head = module.head
    assert isinstance(head, nn.Module)
    return {k: v.detach().cpu().clone() for k, v in head.state_dict().items()}


def standardize(x: np.ndarray, fit_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of ``x[fit_rows]`` (a std of 0 becomes 1), in float64."""
    fit = np.asarray(x[fit_rows], dtype=np.float64)
    std = fit.std(axis=0)
    return fit.mean(axis=0), np.where(std == 0, 1.0, std)


def device_for(trainer_kwargs: Mapping[str, Any]) -> torch.device:
    """The device the run's trainer settings point at (CUDA only when asked for or ``auto`` with a GPU)."""
    accelerator = str(trainer_kwargs.get("accelerator", "auto"))
    use_cuda = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if use_cuda and torch.cuda.is_available() else "cpu")


class EmbeddingHeadEngine:
    """Trials of an :class:`MLPHead` on fixed features of one split.

    Args:
        features: One row per task-view position (cached embeddings, or a parameter-free encoder's).
        labels: One label per task-view position.
        split: Positions to fit, validate and test on.
        targets: Loss targets and class weights.
        scorer: Validation selection score (``None`` for fixed-length training only).
        space: The protocol search space this engine's trials come from.
        param_names: Head setting -> parameter name in ``space`` (hidden_dim, dropout, lr, weight_decay,
            batch_size).
        seed: The repeat's r; trial seeds are r + trial number.
        max_epochs: Epoch budget of a trial.
        engine: ``batched`` or ``lightning``.
        make_trainer: Builds an inner Lightning trainer (``lightning`` engine).
        device: Device of the batched engine.
        standardize_features: z-score with the fit part's statistics.
        eval_batch_size: Inference batch size.

    """

    def __init__(self, features: np.ndarray, labels: np.ndarray, split: Split, targets: Targets,
                 scorer: SelectionScorer | None, space: dict[str, list[Any]], param_names: Mapping[str, str],
                 seed: int, max_epochs: int, engine: Engine, make_trainer: TrainerFactory,
                 device: torch.device, standardize_features: bool = True,
                 eval_batch_size: int = 4096) -> None:
        self.split, self.targets, self.scorer, self.space = split, targets, scorer, space
        self.param_names, self.seed, self.max_epochs = dict(param_names), seed, max_epochs
        self.engine, self.make_trainer, self.device = engine, make_trainer, device
        self.eval_batch_size = eval_batch_size
        x = np.asarray(features, dtype=np.float64)
        if standardize_features:
            mean, std = standardize(x, split.fit)
            x = (x - mean) / std
        self.x, self.labels = x.astype(np.float32), labels
        self.details: dict[str, Any] = {"engine": engine, "device": str(device),
                                        "standardized": standardize_features,
                                        "in_features": int(self.x.shape[1])}

    # -- helpers ---------------------------------------------------------------------------------
    def config(self, params: Mapping[str, Any], seed: int) -> HeadConfig:
        """The head settings of a parameter set."""
        p = {key: params[name] for key, name in self.param_names.items()}
        return HeadConfig(int(p["hidden_dim"]), float(p["dropout"]), float(p["lr"]), float(p["weight_decay"]),
                          int(p["batch_size"]), seed)

    def _y(self, positions: np.ndarray) -> np.ndarray:
        return self.targets.encode(self.labels[positions])

    def _score(self, params: Mapping[str, Any]) -> Callable[[np.ndarray], float]:
        assert self.scorer is not None
        scorer, agg = self.scorer, params.get(AGGREGATION_PARAM)
        return lambda out: scorer(out, agg)

    def data(self, with_val: bool) -> HeadData:
        """Tensors of the fit (and validation) part on the engine's device."""
        weight = self.targets.class_weight
        val = self.split.val if with_val else None
        return HeadData(
            x_fit=torch.as_tensor(self.x[self.split.fit], device=self.device),
            y_fit=torch.as_tensor(self._y(self.split.fit), device=self.device),
            x_val=torch.as_tensor(self.x[val], device=self.device) if val is not None else None,
            loss=self.targets.loss, n_outputs=self.targets.n_outputs,
            class_weight=torch.tensor(weight, dtype=torch.float32, device=self.device) if weight else None,
        )

    # -- TrialEngine -----------------------------------------------------------------------------
    def run_batch(self, trials: list[optuna.Trial]) -> list[TrialOutcome]:
        """Train the asked trials with the configured engine."""
        if self.engine == "lightning":
            return [self._lightning_trial(t) for t in trials]
        configs = [self.config(t.params, self.seed + t.number) for t in trials]
        assert self.scorer is not None
        scorer = self.scorer

        def score(i: int, out: np.ndarray) -> float:
            return scorer(out, trials[i].params.get(AGGREGATION_PARAM))

        def on_epoch(i: int, epoch: int, best: float) -> bool:
            trials[i].report(best, epoch)
            return trials[i].should_prune()

        return train_heads(self.data(with_val=True), configs, self.max_epochs, score, on_epoch)

    def _module(self, config: HeadConfig) -> EncoderTask:
        L.seed_everything(config.seed, verbose=False)
        head = MLPHead(self.x.shape[1], self.targets.n_outputs, config.hidden_dim, config.dropout)
        return EncoderTask(nn.Identity(), mode="frozen", head=head, loss=self.targets.loss, head_lr=config.lr,
                           head_weight_decay=config.weight_decay, class_weight=self.targets.class_weight)

    def _loader(self, positions: np.ndarray, batch_size: int, seed: int | None) -> DataLoader:
        dataset = ArrayDataset(z=self.x[positions], y=self._y(positions))
        sampler = EpochPermutationSampler(len(positions), seed) if seed is not None else None
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler)

    def _lightning_trial(self, trial: optuna.Trial) -> TrialOutcome:
        config = self.config(trial.params, self.seed + trial.number)
        assert self.split.val is not None
        module = self._module(config)

        def make(callbacks: list[Callback]) -> L.Trainer:
            return self.make_trainer(callbacks, max_epochs=self.max_epochs)

        train = self._loader(self.split.fit, config.batch_size, config.seed)
        val = self._loader(self.split.val, self.eval_batch_size, None)
        return fit_trial(make, module, train, val, self._score(trial.params), trial, snapshot=head_state)

    def train_fixed(self, params: dict[str, Any], seed: int, epochs: int) -> dict[str, Any]:
        """Train one head for ``epochs`` epochs on the fit part (refit, or a lost weights file)."""
        config = self.config(params, seed)
        if self.engine == "batched":
            (outcome,) = train_heads(self.data(with_val=False), [config], epochs)
            assert outcome.weights is not None
            return outcome.weights
        module = self._module(config)
        trainer = self.make_trainer([], max_epochs=epochs, limit_val_batches=0)
        with frozen_parts_expected():
            trainer.fit(module, self._loader(self.split.fit, config.batch_size, config.seed))
        return head_state(module)

    @torch.no_grad()
    def predict(self, params: dict[str, Any], weights: dict[str, Any], positions: np.ndarray) -> np.ndarray:
        """Head outputs for the given positions (eval mode, in ``eval_batch_size`` chunks)."""
        config = self.config(params, 0)
        head = MLPHead(self.x.shape[1], self.targets.n_outputs, config.hidden_dim, config.dropout)
        head.load_state_dict(weights)
        head.eval()
        x, step = torch.as_tensor(self.x[positions]), self.eval_batch_size
        return torch.cat([head(x[i : i + step]) for i in range(0, len(x), step)]).numpy()


class MLPRegime(NeuralRegime):
    """The frozen MLP probe (PROTOCOL.md 4.3), searched by TPE + Hyperband on the 20 % holdout.

    Args:
        search: The Optuna budget (:class:`~ppgbench_pl.hpo.SearchSettings`; published 48 trials, 8
            start-up, 25 epochs, Hyperband 1/3, 1 trial at a time). With ``parallel_trials: k`` the k
            trials asked together train as one stacked model.
        engine: ``batched`` (stacked heads, no Lightning loop) or ``lightning`` (the reference).
        refit: Retrain the winner on all outer-training groups (deviation; published False).
        class_weighting: ``balanced`` (published) or ``none``.
        binary_selection_metric: ``auroc`` (published for the MLP) or ``balanced_accuracy``.
        subject_repeats: Repeats on subject-level tasks (3).
        search_space: Replacement values for some parameters of
            :data:`~ppgbench_pl.hpo.spaces.MLP_SPACE`.
        eval_batch_size: Inference batch size (4096).
        standardize_targets: Train regression heads on z-scored targets (not published; off by default).

    """

    name = "mlp"
    uses_embeddings = True
    default_binary_metric = "auroc"
    default_max_epochs = 25
    default_parallel_trials = 1

    def __init__(self, search: SearchSettings | None = None, engine: Engine = "batched", refit: bool = False,
                 class_weighting: ClassWeighting = "balanced", binary_selection_metric: str | None = None,
                 subject_repeats: int = 3, search_space: dict[str, list[Any]] | None = None,
                 eval_batch_size: int = 4096, standardize_targets: bool = False) -> None:
        super().__init__(search, refit, class_weighting, binary_selection_metric, subject_repeats, search_space,
                         eval_batch_size, standardize_targets=standardize_targets)
        if engine not in ("batched", "lightning"):
            raise ConfigError(f"engine must be 'batched' or 'lightning', got {engine!r}")
        self.engine = engine

    def backend(self) -> str:
        """The trial engine."""
        return f"torch-{self.engine}"

    def check_trainer(self, trainer_kwargs: dict[str, Any]) -> None:
        """The batched engine trains in float32 only; another ``trainer.precision`` needs the Lightning engine."""
        precision = trainer_kwargs.get("precision")
        if self.engine == "batched" and precision not in (None, "32-true"):
            raise ConfigError(f"trainer.precision {precision}: the MLP probe's batched engine trains in float32 "
                              "(as published); set the regime's engine: lightning to train its heads at that "
                              "precision, or leave trainer.precision out")

    def make_engine(self, ctx: JobContext, split: Split, targets: Targets, scorer: SelectionScorer | None,
                    seed: int) -> EmbeddingHeadEngine:
        """Heads on the job's cached embeddings, z-scored on the fit part."""
        if ctx.embeddings is None:
            raise RuntimeError("the MLP probe needs the cached embeddings (uses_embeddings=True)")

        # The published MLP loop does not use AMP although the setting is on (PROTOCOL.md 4.3): float32 unless
        # trainer.precision says otherwise (then it reaches every inner trainer, see check_trainer).
        precision = ctx.trainer_kwargs.get("precision") or "32-true"

        def make_trainer(callbacks: list[Callback], **overrides: Any) -> L.Trainer:
            return ctx.make_trainer([self, *callbacks], **{"precision": precision, **overrides})

        return EmbeddingHeadEngine(ctx.features(), ctx.view.y, split, targets, scorer, MLP_SPACE,
                                   MLP_PARAMS, seed, self.max_epochs, self.engine, make_trainer,
                                   device_for(ctx.trainer_kwargs), eval_batch_size=self.eval_batch_size)
