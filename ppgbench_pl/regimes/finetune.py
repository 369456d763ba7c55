"""End-to-end finetuning regime: encoder + MLP head trained jointly, Optuna-searched (PROTOCOL.md 4.4).

Each trial: a fresh encoder copy and a head drawn from the study's head stream (seed r, trial n gets draw n+1
whatever its stack mates, retrains or resumes: decision #22; ``reseed_head``: seeded r + n). Parameter-free
encoders (PRV; PROTOCOL.md 10 item 4) get a head-only finetune on their fixed features (``mode = head_only``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import partial
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE
from ppgbench_pl.hpo.trial_stack import Slot
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.mlp import HeadFactory
from ppgbench_pl.regimes.neural import ClassWeighting, NeuralRegime, Split, Targets
from ppgbench_pl.tasks.encoder_task import EncoderTask

#: The head parameters of the finetune space, for parameter-free encoders.
HEAD_ONLY_PARAMS = {"hidden_dim": "hidden_dim", "dropout": "head_dropout", "lr": "head_lr",
                    "weight_decay": "head_weight_decay", "batch_size": "batch_size"}
AmpDtype = Literal["float16", "bfloat16"]
HEAD_ONLY_SPACE = {k: v for k, v in FINETUNE_SPACE.items() if k in (*HEAD_ONLY_PARAMS.values(), "activation")}


def is_parameter_free(encoder: PPGEncoder) -> bool:
    """True for encoders with nothing to finetune (declared ``trainable = False``, or no parameters)."""
    return not getattr(encoder, "trainable", True) or not any(p.numel() for p in encoder.parameters())


class HeadedEncoder(nn.Module):
    """Encoder features of *preprocessed* windows -> MLP head; state-dict keys ``encoder.*``, ``head.*``."""

    def __init__(self, encoder: nn.Module, head: MLPHead) -> None:
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, x: Tensor) -> Tensor:
        """Head outputs."""
        return self.head(self.encoder.forward_features(x))  # type: ignore[operator]


class FinetuneFactory(HeadFactory):
    """Trials of encoder + head on the preprocessed windows of one split (``seed``: r, the head stream's)."""

    space = FINETUNE_SPACE

    def __init__(self, ctx: JobContext, split: Split, targets: Targets, seed: int, reseed_head: bool,
                 make_trainer: Any, precision: str, eval_batch_size: int = 4096) -> None:
        self.split, self.targets, self.reseed_head = split, targets, reseed_head
        self.make_trainer, self.eval_batch_size = make_trainer, eval_batch_size
        self.pristine = copy.deepcopy(ctx.encoder).cpu()
        self.rows, self.labels, self.windows = ctx.view.rows, ctx.view.y, ctx.raw_windows()
        self.embed_dim = self._probe_embed_dim()
        self.restart_stream(seed)
        self.details: dict[str, Any] = {"mode": "end_to_end", "embed_dim": self.embed_dim, "precision": precision,
                                        "engine": "trial_stack", "reseed_head": reseed_head}
        self._data = {}

    def for_search(self, seed: int) -> FinetuneFactory:
        """The factory of another search seed: the encoder and prepared rows shared, a head stream of its own."""
        fork = copy.copy(self)  # shallow: the pristine encoder and the rows cache (self._data) are shared
        fork.restart_stream(seed)  # its own study is attached when it opens
        fork.details = dict(self.details)
        return fork

    @torch.no_grad()
    def inputs(self, positions: np.ndarray) -> Tensor:
        """The encoder's preprocessing of some windows (float32, CPU)."""
        rows = self.rows[positions]
        x, mean, std = (torch.as_tensor(a[rows]) for a in
                        (self.windows.x, self.windows.ppg_mean, self.windows.ppg_std))
        return self.pristine.preprocess(x, mean, std).float()  # type: ignore[operator]

    def _probe_embed_dim(self) -> int:
        """Run one window through the encoder (eval mode, on a copy) to size the head input."""
        encoder = copy.deepcopy(self.pristine).eval()
        with torch.no_grad():
            z = encoder.forward_features(self.inputs(self.split.fit[:1]))  # type: ignore[operator]
        if z.ndim != 2:
            name = getattr(self.pristine, "name", "encoder")
            raise ConfigError(f"{name} returned shape {tuple(z.shape)}, expected [batch, embed_dim]")
        return int(z.shape[1])

    def trial_params(self, number: int) -> Mapping[str, Any] | None:
        """Trial ``number``'s parameters in the study (None if unknown, or a resume's placeholder)."""
        found = [t.params for t in self.study.get_trials(deepcopy=False) if t.number == number] if self.study else []
        return found[0] if found and found[0] else None

    def restart_stream(self, seed: int) -> None:
        """The head stream of seed r at its start, nothing drawn: its (n+1)-th head is trial n's."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.stream_start = self.head_stream = torch.random.get_rng_state()
        self.stream_seed, self.drawn, self.widths = seed, 0, dict[int, int]()

    def head(self, params: Mapping[str, Any], seed: int | None, number: int = 0) -> MLPHead:
        """A new head: from ``seed`` if given, else trial ``number``'s draw of the head stream (decision #22)."""
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            else:
                self._seek(number, int(params["hidden_dim"]))
            head = MLPHead(self.embed_dim, self.targets.n_outputs, int(params["hidden_dim"]),
                           float(params["head_dropout"]))
            if seed is None:
                self.head_stream, self.drawn = torch.random.get_rng_state(), number + 1
                self.widths[number] = int(params["hidden_dim"])
        return head

    def _seek(self, number: int, width: int) -> None:
        """Seek the forked RNG to head draw ``number``, replaying earlier draws (size: hidden_dim, else ``width``)."""
        if number < 0:
            raise ValueError(f"trial number {number} < 0: a slot's seed must be the stream's seed r + trial number")
        start = self.drawn if number >= self.drawn else 0
        torch.random.set_rng_state(self.head_stream if start else self.stream_start)
        for k in range(start, number):
            known = self.trial_params(k)
            replayed = self.widths.get(k) or (int(known["hidden_dim"]) if known else width)
            MLPHead(self.embed_dim, self.targets.n_outputs, replayed)

    def slot(self, name: str, params: Mapping[str, Any], seed: int, epochs: int, validate: bool) -> Slot:
        """A copy of the encoder and a new head, with a head group and an encoder group."""
        encoder = copy.deepcopy(self.pristine).requires_grad_(True)
        # the slot's seed is r + trial number (PROTOCOL.md 4.3; r_k for search seed k), and r this factory's seed
        net = HeadedEncoder(encoder, self.head(params, seed if self.reseed_head else None, seed - self.stream_seed))
        lr, decay = float(params["head_lr"]), float(params["head_weight_decay"])
        groups = [{"params": list(net.head.parameters()), "lr": lr, "weight_decay": decay},
                  {"params": list(net.encoder.parameters()), "lr": lr * float(params["encoder_lr_ratio"]),
                   "weight_decay": decay * float(params["encoder_weight_decay_ratio"])}]
        return Slot(name, net, self.data(validate), int(params["batch_size"]), seed, groups, epochs,
                    freeze_stats=params["batchnorm_mode"] == "freeze_stats")

    def network(self, params: Mapping[str, Any]) -> nn.Module:
        """An encoder copy and a head to load a winner's weights into."""
        return HeadedEncoder(copy.deepcopy(self.pristine), self.head(params, 0))


class FinetuneRegime(NeuralRegime):
    """End-to-end finetuning (PROTOCOL.md 4.4), searched by TPE + Hyperband on the 20 % holdout.

    The arguments are :class:`~ppgbench_pl.regimes.neural.NeuralRegime`'s (published: 48 trials, 15 epochs,
    8 at once, ``balanced_accuracy``, ``stack_jobs`` 1), plus:

    Args:
        amp: Mixed precision when the trainer runs on CUDA (published: fp16 with a gradient scaler); never on CPU.
        amp_dtype: ``float16`` (published, ``16-mixed``) or ``bfloat16`` (``bf16-mixed``, no loss scaling).
        reseed_head: Seed each trial's head with r + trial number (published: False, the study's head stream).
    """

    name = "finetune"
    uses_embeddings = False
    default_binary_metric = "balanced_accuracy"
    default_max_epochs = 15
    default_parallel_trials = 8

    def __init__(self, search: SearchSettings | None = None, amp: bool = True, amp_dtype: AmpDtype = "float16",
                 reseed_head: bool = False, refit: bool = False, class_weighting: ClassWeighting = "balanced",
                 binary_selection_metric: str | None = None, subject_repeats: int = 3,
                 search_space: dict[str, list[Any]] | None = None, eval_batch_size: int = 4096,
                 standardize_targets: bool = False, stack_jobs: int | None = None,
                 search_seeds: list[int] | None = None) -> None:
        super().__init__(search, refit, class_weighting, binary_selection_metric, subject_repeats, search_space,
                         eval_batch_size, standardize_targets=standardize_targets, stack_jobs=stack_jobs,
                         search_seeds=search_seeds)
        if amp_dtype not in ("float16", "bfloat16"):
            raise ConfigError(f"amp_dtype must be 'float16' or 'bfloat16', got {amp_dtype!r}")
        self.amp, self.amp_dtype, self.reseed_head = amp, amp_dtype, reseed_head
        self._features: tuple[str, np.ndarray] | None = None

    def check_trainer(self, trainer_kwargs: dict[str, Any]) -> None:
        """Also refuse ``amp``/``amp_dtype`` beside ``trainer.precision``, which wins (they would do nothing)."""
        super().check_trainer(trainer_kwargs)
        changed = [f"{k}={getattr(self, k)!r}" for k, v in (("amp", True), ("amp_dtype", "float16"))
                   if getattr(self, k) != v]
        if trainer_kwargs.get("precision") is not None and changed:
            raise ConfigError(f"finetune {', '.join(changed)}: has no effect beside trainer.precision="
                              f"{trainer_kwargs['precision']!r}, which sets the precision; keep one of the two")

    def precision(self, ctx: JobContext) -> str:
        """``trainer.precision`` when given, else fp16 (or bf16) mixed precision on CUDA, float32 elsewhere."""
        explicit = ctx.trainer_kwargs.get("precision")
        if explicit is not None:
            return str(explicit)
        accelerator = str(ctx.trainer_kwargs.get("accelerator", "auto"))
        cuda = torch.cuda.is_available() and accelerator in ("auto", "gpu", "cuda")
        if self.amp and cuda:
            return "16-mixed" if self.amp_dtype == "float16" else "bf16-mixed"
        return "32-true"

    def make_factory(self, ctx: JobContext, split: Split, targets: Targets,
                     seed: int) -> FinetuneFactory | HeadFactory:
        """End-to-end trials, or head-only ones for parameter-free encoders."""
        precision = self.precision(ctx)
        make_trainer = partial(ctx.make_trainer, precision=precision)
        if not is_parameter_free(ctx.encoder):
            return FinetuneFactory(ctx, split, targets, seed, self.reseed_head, make_trainer, precision,
                                   self.eval_batch_size)
        factory = HeadFactory(self.features(ctx), ctx.view.y, split, targets, HEAD_ONLY_PARAMS, HEAD_ONLY_SPACE,
                              make_trainer, self.eval_batch_size)
        factory.details.update(mode="head_only", reason="parameter-free encoder: only the head can be trained")
        return factory

    def features(self, ctx: JobContext) -> np.ndarray:
        """The parameter-free encoder's features of the task's rows (the cached ones if given), once per job."""
        if self._features is not None and self._features[0] == ctx.job_id:
            return self._features[1]
        if ctx.embeddings is not None:
            feats = ctx.features()
        else:
            loader = ctx.data.loader(np.arange(len(ctx.view.rows)))  # raw windows: no embeddings given
            batches: Any = ctx.make_trainer([self]).predict(EncoderTask(ctx.encoder, mode="frozen"), loader)
            feats = torch.cat(batches).numpy()
        self._features = (ctx.job_id, feats)
        return feats
