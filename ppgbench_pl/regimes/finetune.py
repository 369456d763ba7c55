"""End-to-end finetuning regime: encoder + MLP head trained jointly, Optuna-searched (PROTOCOL.md 4.4).

Every trial starts from a fresh copy of the pristine encoder (``copy.deepcopy``, all parameters
trainable) and a new :class:`~ppgbench_pl.heads.MLPHead` seeded with r + trial number, wrapped in
:class:`~ppgbench_pl.tasks.EncoderTask` ``mode="finetune"`` (AdamW with a head group and an encoder group,
BatchNorm mode ``train`` or ``freeze_stats``). Raw windows go through the encoder's own preprocessing on
every batch. AMP (``16-mixed``) is used only when the trainer runs on a CUDA GPU. There is no feature
standardisation: the head's LayerNorm is the only input normalisation.

Parameter-free encoders (PRV; PROTOCOL.md 10 item 4): the published code rejects them, yet the paper
reports PRV in every cell. Here their finetune cell is a *head-only* finetune: with nothing in the
encoder to train, end-to-end training reduces to training the head on the encoder's fixed features.
The features are computed once per job, z-scored on the holdout-fit part (a fixed extractor cannot adapt
its output scale as a trained encoder does), and the head is searched over the finetune space's head
parameters (``hidden_dim``, ``head_dropout``, ``head_lr``, ``head_weight_decay``, ``batch_size``) with the
finetune budget and selection metric. The job record says so (``engine.mode = "head_only"``).
"""

from __future__ import annotations

import copy
from typing import Any

import lightning as L
import numpy as np
import optuna
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.lightning_trial import fit_trial, frozen_parts_expected, module_state
from ppgbench_pl.hpo.optuna_search import TrialOutcome
from ppgbench_pl.hpo.shuffle import EpochPermutationSampler
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, FINETUNE_SPACE
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.mlp import EmbeddingHeadEngine, Engine, TrainerFactory, device_for
from ppgbench_pl.regimes.neural import ClassWeighting, NeuralRegime, SelectionScorer, Split, Targets
from ppgbench_pl.tasks.encoder_task import EncoderTask

#: The head parameters of the finetune space, for parameter-free encoders.
HEAD_ONLY_PARAMS = {"hidden_dim": "hidden_dim", "dropout": "head_dropout", "lr": "head_lr",
                    "weight_decay": "head_weight_decay", "batch_size": "batch_size"}
HEAD_ONLY_SPACE = {k: v for k, v in FINETUNE_SPACE.items() if k in (*HEAD_ONLY_PARAMS.values(), "activation")}


def is_parameter_free(encoder: PPGEncoder) -> bool:
    """True for encoders with nothing to finetune (declared ``trainable = False``, or no parameters)."""
    return not getattr(encoder, "trainable", True) or not any(p.numel() for p in encoder.parameters())


class FinetuneEngine:
    """Trials of encoder + head on raw windows of one split, one ``Trainer.fit`` each.

    Args:
        ctx: The job (encoder, data, trainer settings).
        split: Positions to fit, validate and test on.
        targets: Loss targets and class weights.
        scorer: Validation selection score (``None`` for fixed-length training only).
        seed: The repeat's r; trial seeds are r + trial number.
        max_epochs: Epoch budget of a trial.
        make_trainer: Builds an inner trainer around callbacks (device, precision, max_epochs).
        precision: The trainers' precision (recorded).
        eval_batch_size: Validation and test batch size.
    """

    space = FINETUNE_SPACE

    def __init__(self, ctx: JobContext, split: Split, targets: Targets, scorer: SelectionScorer | None,
                 seed: int, max_epochs: int, make_trainer: TrainerFactory, precision: str,
                 eval_batch_size: int = 4096) -> None:
        self.split, self.targets, self.scorer, self.seed = split, targets, scorer, seed
        self.max_epochs, self.make_trainer, self.eval_batch_size = max_epochs, make_trainer, eval_batch_size
        self.pristine = copy.deepcopy(ctx.encoder).cpu()
        view, windows = ctx.view(), ctx.datamodule.windows(ctx.fs)
        self.rows, self.labels, self.windows = view.rows, view.y, windows
        self.embed_dim = self._probe_embed_dim()
        self.details: dict[str, Any] = {"mode": "end_to_end", "embed_dim": self.embed_dim,
                                        "precision": precision}

    def _arrays(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        rows = self.rows[positions]
        return {"x": self.windows.x[rows], "ppg_mean": self.windows.ppg_mean[rows],
                "ppg_std": self.windows.ppg_std[rows]}

    @torch.no_grad()
    def _probe_embed_dim(self) -> int:
        """Run one window through the encoder (eval mode, on a copy) to size the head input."""
        encoder = copy.deepcopy(self.pristine).eval()
        sample = {k: torch.as_tensor(v) for k, v in self._arrays(self.split.fit[:1]).items()}
        z = encoder(sample["x"], sample["ppg_mean"], sample["ppg_std"])
        if z.ndim != 2:
            name = getattr(self.pristine, "name", "encoder")
            raise ConfigError(f"{name} returned shape {tuple(z.shape)}, expected [batch, embed_dim]")
        return int(z.shape[1])

    def _module(self, params: dict[str, Any], seed: int) -> EncoderTask:
        """A fresh copy of the pristine encoder (all parameters trainable) and a head seeded with ``seed``."""
        L.seed_everything(seed, verbose=False)
        encoder = copy.deepcopy(self.pristine).requires_grad_(True).train()
        head = MLPHead(self.embed_dim, self.targets.n_outputs, int(params["hidden_dim"]),
                       float(params["head_dropout"]))
        return EncoderTask(encoder, mode="finetune", head=head, loss=self.targets.loss,
                           head_lr=float(params["head_lr"]),
                           encoder_lr_ratio=float(params["encoder_lr_ratio"]),
                           head_weight_decay=float(params["head_weight_decay"]),
                           encoder_weight_decay_ratio=float(params["encoder_weight_decay_ratio"]),
                           batchnorm_mode=params["batchnorm_mode"], class_weight=self.targets.class_weight)

    def _loader(self, positions: np.ndarray, batch_size: int, seed: int | None,
                labels: bool = True) -> DataLoader:
        arrays = self._arrays(positions)
        if labels:
            arrays["y"] = self.targets.encode(self.labels[positions])
        sampler = EpochPermutationSampler(len(positions), seed) if seed is not None else None
        return DataLoader(ArrayDataset(**arrays), batch_size=batch_size, sampler=sampler)

    def run_batch(self, trials: list[optuna.Trial]) -> list[TrialOutcome]:
        """Train the asked trials one after another."""
        return [self._trial(t) for t in trials]

    def _trial(self, trial: optuna.Trial) -> TrialOutcome:
        assert self.scorer is not None and self.split.val is not None
        seed, params = self.seed + trial.number, trial.params
        module = self._module(params, seed)
        scorer, agg = self.scorer, params.get(AGGREGATION_PARAM)

        def make(callbacks: list[Callback]) -> L.Trainer:
            return self.make_trainer(callbacks, max_epochs=self.max_epochs)

        train = self._loader(self.split.fit, int(params["batch_size"]), seed)
        val = self._loader(self.split.val, self.eval_batch_size, None)
        return fit_trial(make, module, train, val, lambda out: scorer(out, agg), trial, snapshot=module_state)

    def train_fixed(self, params: dict[str, Any], seed: int, epochs: int) -> dict[str, Any]:
        """Train for ``epochs`` epochs on the fit part (refit, or a lost weights file)."""
        module = self._module(params, seed)
        trainer = self.make_trainer([], max_epochs=epochs, limit_val_batches=0)
        with frozen_parts_expected():
            trainer.fit(module, self._loader(self.split.fit, int(params["batch_size"]), seed))
        return module_state(module)

    def predict(self, params: dict[str, Any], weights: dict[str, Any], positions: np.ndarray) -> np.ndarray:
        """Head outputs for the given positions (Lightning predict, eval mode)."""
        module = self._module(params, self.seed)
        module.load_state_dict(weights)
        loader = self._loader(positions, self.eval_batch_size, None, labels=False)
        return torch.cat(self.make_trainer([]).predict(module, loader)).numpy()


class FinetuneRegime(NeuralRegime):
    """End-to-end finetuning (PROTOCOL.md 4.4), searched by TPE + Hyperband on the 20 % holdout.

    Args:
        n_trials: Finished trials per study (48).
        n_startup_trials: Random start-up trials (8).
        max_epochs: Epoch budget / Hyperband max resource (15).
        min_resource: Hyperband min resource (1).
        reduction_factor: Hyperband reduction factor (3).
        parallel_trials: Trials asked from TPE together (8 published; they run one after another here).
        amp: fp16 autocast with gradient scaling when the trainer runs on CUDA (published); never on CPU.
        head_only_engine: Engine of the head-only search for parameter-free encoders (``batched`` or
            ``lightning``, see :mod:`ppgbench_pl.regimes.mlp`).
        refit: Retrain the winner on all outer-training groups (deviation; published False).
        class_weighting: ``balanced`` (published) or ``none``.
        binary_selection_metric: ``balanced_accuracy`` (published for finetuning) or ``auroc``.
        subject_repeats: Repeats on subject-level tasks (3).
        search_space: Replacement values for some parameters of
            :data:`~ppgbench_pl.hpo.spaces.FINETUNE_SPACE`.
        storage: Optuna storage (default: SQLite in the job folder); see :class:`NeuralRegime`.
        eval_batch_size: Validation and test batch size (4096).
        standardize_targets: Train regression heads on z-scored targets (not published; off by default).
    """

    name = "finetune"
    uses_embeddings = False
    default_binary_metric = "balanced_accuracy"

    def __init__(self, n_trials: int = 48, n_startup_trials: int = 8, max_epochs: int = 15,
                 min_resource: int = 1, reduction_factor: int = 3, parallel_trials: int = 8, amp: bool = True,
                 head_only_engine: Engine = "batched", refit: bool = False,
                 class_weighting: ClassWeighting = "balanced", binary_selection_metric: str | None = None,
                 subject_repeats: int = 3, search_space: dict[str, list[Any]] | None = None,
                 storage: str | None = None, eval_batch_size: int = 4096,
                 standardize_targets: bool = False) -> None:
        super().__init__(n_trials, n_startup_trials, max_epochs, min_resource, reduction_factor,
                         parallel_trials, refit, class_weighting, binary_selection_metric, subject_repeats,
                         search_space, storage, eval_batch_size, standardize_targets=standardize_targets)
        self.amp, self.head_only_engine = amp, head_only_engine
        self._features: tuple[str, np.ndarray] | None = None

    def backend(self) -> str:
        """Lightning trainers (end to end) or the head-only engine."""
        return "lightning"

    def make_engine(self, ctx: JobContext, split: Split, targets: Targets, scorer: SelectionScorer | None,
                    seed: int) -> FinetuneEngine | EmbeddingHeadEngine:
        """End-to-end engine, or a head-only one for parameter-free encoders."""
        cuda = device_for(ctx.trainer_kwargs).type == "cuda"
        precision = "16-mixed" if (self.amp and cuda) else "32-true"

        def make_trainer(callbacks: list[Callback], **overrides: Any) -> L.Trainer:
            return ctx.make_trainer([self, *callbacks], precision=precision, **overrides)

        if not is_parameter_free(ctx.encoder):
            return FinetuneEngine(ctx, split, targets, scorer, seed, self.max_epochs, make_trainer, precision,
                                  self.eval_batch_size)
        engine = EmbeddingHeadEngine(self.features(ctx), ctx.view().y, split, targets, scorer,
                                     HEAD_ONLY_SPACE, HEAD_ONLY_PARAMS, seed, self.max_epochs,
                                     self.head_only_engine, make_trainer, device_for(ctx.trainer_kwargs),
                                     eval_batch_size=self.eval_batch_size)
        engine.details.update(mode="head_only", reason="parameter-free encoder: only the head can be trained")
        return engine

    def features(self, ctx: JobContext) -> np.ndarray:
        """The parameter-free encoder's features of the task's rows, computed at most once per job.

        The run's cached embeddings are used when the runner passes them (it does for such encoders).
        """
        if self._features is not None and self._features[0] == ctx.job_id:
            return self._features[1]
        view = ctx.view()
        if ctx.embeddings is not None:
            feats = ctx.embeddings[view.rows]
        else:
            win, rows = ctx.datamodule.windows(ctx.fs), view.rows
            dataset = ArrayDataset(x=win.x[rows], ppg_mean=win.ppg_mean[rows], ppg_std=win.ppg_std[rows])
            loader = DataLoader(dataset, batch_size=ctx.datamodule.batch_size)
            batches = ctx.make_trainer([self]).predict(EncoderTask(ctx.encoder, mode="frozen"), loader)
            feats = torch.cat(batches).numpy()
        self._features = (ctx.job_id, feats)
        return feats
