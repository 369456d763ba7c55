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

import contextlib
import copy
from typing import Any, Literal

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
from ppgbench_pl.hpo.optuna_search import SearchSettings, TrialOutcome
from ppgbench_pl.hpo.shuffle import EpochPermutationSampler
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, FINETUNE_SPACE
from ppgbench_pl.hpo.stacked import (
    STACK_MODES,
    HeadedEncoder,
    StackedConfig,
    StackedData,
    StackMode,
    resolve_stack_mode,
    supports_mixed_batchnorm,
    train_stacked,
)
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.mlp import EmbeddingHeadEngine, Engine, TrainerFactory, device_for
from ppgbench_pl.regimes.neural import ClassWeighting, NeuralRegime, SelectionScorer, Split, Targets
from ppgbench_pl.tasks.encoder_task import EncoderTask

#: The head parameters of the finetune space, for parameter-free encoders.
HEAD_ONLY_PARAMS = {"hidden_dim": "hidden_dim", "dropout": "head_dropout", "lr": "head_lr",
                    "weight_decay": "head_weight_decay", "batch_size": "batch_size"}
FinetuneEngineName = Literal["stacked", "lightning"]
AmpDtype = Literal["float16", "bfloat16"]
HEAD_ONLY_SPACE = {k: v for k, v in FINETUNE_SPACE.items() if k in (*HEAD_ONLY_PARAMS.values(), "activation")}


def is_parameter_free(encoder: PPGEncoder) -> bool:
    """True for encoders with nothing to finetune (declared ``trainable = False``, or no parameters)."""
    return not getattr(encoder, "trainable", True) or not any(p.numel() for p in encoder.parameters())


#: Precisions the stacked engine implements (autocast); others need ``engine: lightning``.
STACKED_PRECISIONS = ("32-true", "16-mixed", "bf16-mixed")

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
                 eval_batch_size: int = 4096, reseed_head: bool = False) -> None:
        self.split, self.targets, self.scorer, self.seed = split, targets, scorer, seed
        self.max_epochs, self.make_trainer, self.eval_batch_size = max_epochs, make_trainer, eval_batch_size
        self.reseed_head = reseed_head
        self.pristine = copy.deepcopy(ctx.encoder).cpu()
        view, windows = ctx.view, ctx.raw_windows()
        self.rows, self.labels, self.windows = view.rows, view.y, windows
        self.embed_dim = self._probe_embed_dim()
        self.details: dict[str, Any] = {"mode": "end_to_end", "embed_dim": self.embed_dim,
                                        "precision": precision, "engine": "lightning",
                                        "reseed_head": reseed_head}

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

    def _head(self, params: dict[str, Any], seed: int) -> MLPHead:
        """A new head for a trial.

        Drawn from the job's running torch RNG (published: not reseeded per trial), or seeded with the
        trial's seed under ``reseed_head``.
        """
        def build() -> MLPHead:
            return MLPHead(self.embed_dim, self.targets.n_outputs, int(params["hidden_dim"]),
                           float(params["head_dropout"]))
        if not self.reseed_head:
            return build()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return build()

    def _module(self, params: dict[str, Any], seed: int) -> EncoderTask:
        """A fresh copy of the pristine encoder (all parameters trainable) and a new head."""
        encoder = copy.deepcopy(self.pristine).requires_grad_(True).train()
        head = self._head(params, seed)
        L.seed_everything(seed, verbose=False)  # dropout draws of this trial
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
        with torch.random.fork_rng(devices=[]):  # the head is overwritten: its init must not use the job's RNG
            module = self._module(params, self.seed)
        module.load_state_dict(weights)
        loader = self._loader(positions, self.eval_batch_size, None, labels=False)
        batches: Any = self.make_trainer([]).predict(module, loader)
        return torch.cat(batches).numpy()


class StackedFinetuneEngine(FinetuneEngine):
    """The trials asked together train as stacked models (:mod:`ppgbench_pl.hpo.stacked`) on one device.

    Under ``vmap`` trials are grouped by what a stack must share: hidden width and batch size (and BatchNorm
    mode for an encoder whose BatchNorms cannot take a per-trial mode); each group trains as one stacked
    model, the groups one after another. Under ``interleaved`` (the CPU default) all asked trials form one
    stack whatever their batch sizes. Inputs are preprocessed once per job.

    Args:
        device: Where the stacks train.
        amp_dtype: Autocast dtype (``torch.float16`` or ``torch.bfloat16``), or None for float32.
        stack_mode: ``auto``, ``vmap`` or ``interleaved`` (:mod:`ppgbench_pl.hpo.stacked`).
        (others as :class:`FinetuneEngine`)

    """

    def __init__(self, ctx: JobContext, split: Split, targets: Targets, scorer: SelectionScorer | None,
                 seed: int, max_epochs: int, make_trainer: TrainerFactory, precision: str,
                 eval_batch_size: int = 4096, reseed_head: bool = False, device: torch.device | None = None,
                 amp_dtype: torch.dtype | None = None, stack_mode: StackMode = "auto") -> None:
        super().__init__(ctx, split, targets, scorer, seed, max_epochs, make_trainer, precision, eval_batch_size,
                         reseed_head)
        self.device, self.amp_dtype = device or torch.device("cpu"), amp_dtype
        try:
            self.stack_mode = resolve_stack_mode(stack_mode, self.device, self.pristine)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.details.update(engine="stacked", stack_mode=self.stack_mode)
        self._inputs: dict[str, torch.Tensor] = {}

    def _preprocessed(self, name: str, positions: np.ndarray) -> torch.Tensor:
        """The encoder's preprocessing of some windows, once per part (``fit``, ``val``), on the device."""
        if name not in self._inputs:
            arrays = {k: torch.as_tensor(v) for k, v in self._arrays(positions).items()}
            with torch.no_grad():
                x = self.pristine.preprocess(arrays["x"], arrays["ppg_mean"], arrays["ppg_std"])  # type: ignore[operator]
            self._inputs[name] = x.to(self.device)
        return self._inputs[name]

    def _net(self, params: dict[str, Any], seed: int) -> HeadedEncoder:
        encoder = copy.deepcopy(self.pristine).requires_grad_(True)
        return HeadedEncoder(encoder, self._head(params, seed))

    @staticmethod
    def _config(params: dict[str, Any], seed: int) -> StackedConfig:
        lr, decay = float(params["head_lr"]), float(params["head_weight_decay"])
        return StackedConfig(seed, int(params["batch_size"]), float(params["head_dropout"]), lr,
                             lr * float(params["encoder_lr_ratio"]), decay,
                             decay * float(params["encoder_weight_decay_ratio"]))

    def _data(self, with_val: bool) -> StackedData:
        weight = self.targets.class_weight
        y = torch.as_tensor(self.targets.encode(self.labels[self.split.fit]), device=self.device)
        x_val = self._preprocessed("val", self.split.val) if with_val and self.split.val is not None else None
        return StackedData(self._preprocessed("fit", self.split.fit), y, x_val, self.targets.loss,
                           torch.tensor(weight, dtype=torch.float32, device=self.device) if weight else None)

    def _train(self, items: list[tuple[dict[str, Any], int]], epochs: int, score: Any = None,
               on_epoch: Any = None) -> list[TrialOutcome]:
        """Group (params, seed) pairs into stacks and train each; outcomes in input order."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        vmap = self.stack_mode == "vmap"
        mixed = supports_mixed_batchnorm(self.pristine)  # else BatchNorm modes train in separate stacks
        for i, (params, _) in enumerate(items):
            key = (int(params["hidden_dim"]), int(params["batch_size"]),
                   "" if mixed else params["batchnorm_mode"]) if vmap else ()
            groups.setdefault(key, []).append(i)
        data = self._data(with_val=score is not None)
        nets = [self._net(params, seed) for params, seed in items]  # heads drawn in trial order
        outcomes: dict[int, TrialOutcome] = {}
        for ids in groups.values():
            def group_score(j: int, out: np.ndarray, ids: list[int] = ids) -> float:
                return float(score(ids[j], out))

            def group_epoch(j: int, epoch: int, best: float, ids: list[int] = ids) -> bool:
                return bool(on_epoch(ids[j], epoch, best))

            got = train_stacked([nets[i] for i in ids], [self._config(*items[i]) for i in ids], data, epochs,
                                group_score if score else None, group_epoch if on_epoch else None,
                                freeze_stats=[items[i][0]["batchnorm_mode"] == "freeze_stats" for i in ids],
                                amp_dtype=self.amp_dtype,
                                eval_batch_size=self.eval_batch_size, mode=self.stack_mode)
            outcomes.update(zip(ids, got, strict=True))
        return [outcomes[i] for i in range(len(items))]

    def run_batch(self, trials: list[optuna.Trial]) -> list[TrialOutcome]:
        """Train the asked trials as stacked models, reporting and pruning each on its own."""
        assert self.scorer is not None and self.split.val is not None
        scorer = self.scorer

        def score(i: int, out: np.ndarray) -> float:
            return scorer(out, trials[i].params.get(AGGREGATION_PARAM))

        def on_epoch(i: int, epoch: int, best: float) -> bool:
            trials[i].report(best, epoch)
            return trials[i].should_prune()

        return self._train([(t.params, self.seed + t.number) for t in trials], self.max_epochs, score, on_epoch)

    def train_fixed(self, params: dict[str, Any], seed: int, epochs: int) -> dict[str, Any]:
        """Train one network for ``epochs`` epochs on the fit part (refit, or a lost weights file)."""
        (outcome,) = self._train([(params, seed)], epochs)
        assert outcome.weights is not None
        return outcome.weights

    @torch.no_grad()
    def predict(self, params: dict[str, Any], weights: dict[str, Any], positions: np.ndarray) -> np.ndarray:
        """Head outputs for the given positions (eval mode, in ``eval_batch_size`` chunks)."""
        with torch.random.fork_rng(devices=[]):
            net = self._net(params, self.seed)
        net.load_state_dict(weights)
        net.to(self.device).eval()
        arrays = {k: torch.as_tensor(v) for k, v in self._arrays(positions).items()}
        x = self.pristine.preprocess(arrays["x"], arrays["ppg_mean"], arrays["ppg_std"])  # type: ignore[operator]
        step, outs = self.eval_batch_size, []
        for i in range(0, len(x), step):
            with self._autocast():
                outs.append(net(x[i : i + step].to(self.device)).float().cpu())
        return torch.cat(outs).numpy()

    def _autocast(self) -> Any:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)


class FinetuneRegime(NeuralRegime):
    """End-to-end finetuning (PROTOCOL.md 4.4), searched by TPE + Hyperband on the 20 % holdout.

    Args:
        search: The Optuna budget (:class:`~ppgbench_pl.hpo.SearchSettings`; published 48 trials, 8
            start-up, 15 epochs, Hyperband 1/3, 8 trials at once).
        engine: ``stacked`` (the trials asked together train as stacked models on one device) or
            ``lightning`` (one ``Trainer.fit`` per trial, one after another: the reference).
        amp: Autocast when the trainer runs on CUDA (published: fp16 with a gradient scaler); never on CPU.
        amp_dtype: ``float16`` (published) or ``bfloat16`` (``bf16-mixed``, no loss scaling).
        reseed_head: Seed each trial's head with r + trial number (reproducible per trial, whatever ran
            before). Published: False, the head is drawn from the job's running RNG.
        head_only_engine: Engine of the head-only search for parameter-free encoders (``batched`` or
            ``lightning``, see :mod:`ppgbench_pl.regimes.mlp`).
        stack_mode: How the stacked engine runs a stack: ``auto`` (``interleaved`` on a CPU, ``vmap`` on an
            accelerator), ``vmap`` or ``interleaved`` (:mod:`ppgbench_pl.hpo.stacked`).
        refit: Retrain the winner on all outer-training groups (deviation; published False).
        class_weighting: ``balanced`` (published) or ``none``.
        binary_selection_metric: ``balanced_accuracy`` (published for finetuning) or ``auroc``.
        subject_repeats: Repeats on subject-level tasks (3).
        search_space: Replacement values for some parameters of
            :data:`~ppgbench_pl.hpo.spaces.FINETUNE_SPACE`.
        eval_batch_size: Validation and test batch size (4096).
        standardize_targets: Train regression heads on z-scored targets (not published; off by default).

    """

    name = "finetune"
    uses_embeddings = False
    default_binary_metric = "balanced_accuracy"
    default_max_epochs = 15
    default_parallel_trials = 8

    def __init__(self, search: SearchSettings | None = None, engine: FinetuneEngineName = "stacked",
                 amp: bool = True, amp_dtype: AmpDtype = "float16", reseed_head: bool = False,
                 head_only_engine: Engine = "batched", refit: bool = False,
                 class_weighting: ClassWeighting = "balanced", binary_selection_metric: str | None = None,
                 subject_repeats: int = 3, search_space: dict[str, list[Any]] | None = None,
                 eval_batch_size: int = 4096, standardize_targets: bool = False,
                 stack_mode: StackMode = "auto") -> None:
        super().__init__(search, refit, class_weighting, binary_selection_metric, subject_repeats, search_space,
                         eval_batch_size, standardize_targets=standardize_targets)
        if stack_mode not in STACK_MODES:
            raise ConfigError(f"stack_mode must be one of {', '.join(STACK_MODES)}, got {stack_mode!r}")
        self.stack_mode = stack_mode
        if engine not in ("stacked", "lightning"):
            raise ConfigError(f"engine must be 'stacked' or 'lightning', got {engine!r}")
        if amp_dtype not in ("float16", "bfloat16"):
            raise ConfigError(f"amp_dtype must be 'float16' or 'bfloat16', got {amp_dtype!r}")
        self.engine, self.amp, self.amp_dtype, self.reseed_head = engine, amp, amp_dtype, reseed_head
        self.head_only_engine = head_only_engine
        self._features: tuple[str, np.ndarray] | None = None

    def check_trainer(self, trainer_kwargs: dict[str, Any]) -> None:
        """The stacked engine runs in float32 or 16-bit mixed precision; anything else needs the Lightning one."""
        precision = trainer_kwargs.get("precision")
        if self.engine == "stacked" and precision is not None and precision not in STACKED_PRECISIONS:
            raise ConfigError(f"trainer.precision {precision}: the stacked finetune engine runs at "
                              f"{', '.join(STACKED_PRECISIONS)}; set the regime's engine: lightning for it")

    def backend(self) -> str:
        """The trial engine (end to end) ."""
        return f"torch-{self.engine}" if self.engine == "stacked" else "lightning"

    def make_engine(self, ctx: JobContext, split: Split, targets: Targets, scorer: SelectionScorer | None,
                    seed: int) -> FinetuneEngine | EmbeddingHeadEngine:
        """End-to-end engine, or a head-only one for parameter-free encoders."""
        device = device_for(ctx.trainer_kwargs)
        explicit = ctx.trainer_kwargs.get("precision")
        if explicit is not None:  # trainer.precision reaches every inner trainer and wins over amp/amp_dtype
            precision = str(explicit)
            use_amp = precision in STACKED_PRECISIONS and precision != "32-true"
            amp_dtype = "bfloat16" if precision.startswith("bf16") else "float16"
        else:
            use_amp = self.amp and device.type == "cuda"
            amp_dtype = self.amp_dtype
            precision = ("16-mixed" if amp_dtype == "float16" else "bf16-mixed") if use_amp else "32-true"

        def make_trainer(callbacks: list[Callback], **overrides: Any) -> L.Trainer:
            return ctx.make_trainer([self, *callbacks], precision=precision, **overrides)

        if not is_parameter_free(ctx.encoder):
            if self.engine == "lightning":
                return FinetuneEngine(ctx, split, targets, scorer, seed, self.max_epochs, make_trainer, precision,
                                      self.eval_batch_size, self.reseed_head)
            dtype = getattr(torch, amp_dtype) if use_amp else None
            return StackedFinetuneEngine(ctx, split, targets, scorer, seed, self.max_epochs, make_trainer,
                                         precision, self.eval_batch_size, self.reseed_head, device, dtype,
                                         self.stack_mode)
        engine = EmbeddingHeadEngine(self.features(ctx), ctx.view.y, split, targets, scorer,
                                     HEAD_ONLY_SPACE, HEAD_ONLY_PARAMS, seed, self.max_epochs,
                                     self.head_only_engine, make_trainer, device,
                                     eval_batch_size=self.eval_batch_size)
        engine.details.update(mode="head_only", reason="parameter-free encoder: only the head can be trained")
        return engine

    def features(self, ctx: JobContext) -> np.ndarray:
        """The parameter-free encoder's features of the task's rows, computed at most once per job.

        The run's cached embeddings are used when the runner passes them (it does for such encoders).
        """
        if self._features is not None and self._features[0] == ctx.job_id:
            return self._features[1]
        if ctx.embeddings is not None:
            feats = ctx.features()
        else:
            loader = ctx.loader(np.arange(len(ctx.view.rows)), use_embeddings=False)
            batches: Any = ctx.make_trainer([self]).predict(EncoderTask(ctx.encoder, mode="frozen"), loader)
            feats = torch.cat(batches).numpy()
        self._features = (ctx.job_id, feats)
        return feats
