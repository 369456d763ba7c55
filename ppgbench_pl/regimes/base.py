"""A regime: a Lightning callback of the trainers it builds that turns a :class:`JobContext` into outcomes."""

from __future__ import annotations

import signal
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import numpy as np
from lightning.pytorch.callbacks import Callback

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.data.splits import OuterSplit
from ppgbench_pl.data.task_data import DatasetWindows, TaskView
from ppgbench_pl.datamodules.job import JobDataModule, inner_fold_positions
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.lightning_trainer import build_trainer
from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.results.records import job_id as job_id_of


@dataclass
class JobContext:
    """Everything one job (model, task, regime, seed, outer fold) needs; its rows are its :class:`JobDataModule`'s."""

    job_id: str
    model_name: str
    encoder: PPGEncoder
    #: The job's datamodule: task, seed, outer fold, task view, outer split, holdouts and loaders.
    data: JobDataModule
    #: Persistent per-job folder (Optuna storage lives here, so an interrupted search resumes).
    work_dir: Path
    #: Cached frozen embeddings of every window of the dataset (index with ``view.rows``), or None.
    embeddings: np.ndarray | None = None
    #: Every raw window of the dataset at the encoder's rate (for regimes that run the encoder), or None.
    windows: DatasetWindows | None = None
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)
    #: The user's Lightning callbacks (``trainer.callbacks`` that are not regimes): every trial trainer gets them.
    callbacks: list[Callback] = field(default_factory=list)
    n_inner_folds: int = 4

    @classmethod
    def build(cls, datamodule: PPGDataModule, encoder: PPGEncoder, task: TaskSpec, seed: int, fold: int,
              work_dir: Path, *, job_id: str | None = None, model_name: str | None = None,
              embeddings: np.ndarray | None = None, raw_windows: bool = True,
              trainer_kwargs: dict[str, Any] | None = None, callbacks: list[Callback] | None = None) -> JobContext:
        """The context of one job from its datamodule: view and outer split computed here, once."""
        fs = float(encoder.sampling_rate)
        job = datamodule.job(task, seed, fold, fs=fs)
        job.setup()  # a task that cannot be evaluated fails here, before the regime runs
        name = model_name or encoder.name
        return cls(job_id or job_id_of(name, task.name, "regime", seed, fold), name, encoder, job, Path(work_dir),
                   embeddings, datamodule.windows(fs) if raw_windows else None, dict(trainer_kwargs or {}),
                   list(callbacks or []), datamodule.n_inner_folds)

    @property
    def task(self) -> TaskSpec:
        """The job's task."""
        return self.data.task

    @property
    def seed(self) -> int:
        """The outer seed."""
        return self.data.seed

    @property
    def fold(self) -> int:
        """The outer fold."""
        return self.data.fold

    @property
    def fs(self) -> float:
        """The encoder's rate, at which the data are served."""
        return self.data.fs

    @property
    def view(self) -> TaskView:
        """The task's valid rows at the encoder's rate."""
        return self.data.view

    @property
    def split(self) -> OuterSplit:
        """The outer fold (train, test positions into :attr:`view`)."""
        return self.data.split

    def outer(self) -> tuple[np.ndarray, np.ndarray]:
        """(outer-training positions, outer test positions) into :attr:`view`."""
        return self.split.train, self.split.test

    def features(self, positions: np.ndarray | None = None) -> np.ndarray:
        """Cached embeddings of the view's rows (all, or at ``positions`` into the view)."""
        if self.embeddings is None:
            raise RuntimeError(f"job {self.job_id}: this regime was given no cached embeddings")
        rows = self.view.rows if positions is None else self.view.rows[positions]
        return self.embeddings[rows]

    def raw_windows(self) -> DatasetWindows:
        """The raw windows (regimes that run the encoder themselves)."""
        if self.windows is None:
            raise RuntimeError(f"job {self.job_id}: this regime was given no raw windows")
        return self.windows

    def holdout(self, repeat: int, train: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(fit positions, validation positions): the 20 % group holdout of the neural regimes."""
        return self.data.holdout(repeat, train)

    def inner_folds(self, train: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """(inner-train, inner-validation) positions into :attr:`view` for the grid searches."""
        train = self.split.train if train is None else train
        return inner_fold_positions(self.seed, self.n_inner_folds, self.view.groups, train)

    def make_trainer(self, callbacks: list[Callback], **overrides: Any) -> L.Trainer:
        """An inner trainer: the run's device settings, no logger or checkpoints unless overridden."""
        kwargs = {
            "logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
            "enable_model_summary": False, "num_sanity_val_steps": 0, **self.trainer_kwargs, **overrides,
        }
        return build_trainer(callbacks=callbacks, **kwargs)


@contextmanager
def frozen_parts_expected() -> Iterator[None]:
    """Silence Lightning's notice about modules in eval mode: frozen encoders and ended trials stay in eval."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
        yield


class _SigInt(BaseException):
    """Ctrl-C while Lightning runs (Lightning turns a KeyboardInterrupt into ``sys.exit(1)``)."""


@contextmanager
def interrupts_pass_through() -> Iterator[None]:
    """Let Ctrl-C leave ``Trainer.fit`` as a KeyboardInterrupt, not exit 1 (default handler only)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _SigInt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    except _SigInt:
        raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@dataclass
class RepeatOutcome:
    """One repeat's result: metrics on the outer test fold, chosen parameters, predictions."""

    metrics: dict[str, Any]
    params: dict[str, Any]
    predictions: dict[str, np.ndarray]
    details: dict[str, Any] = field(default_factory=dict)


def score_outcome(ctx: JobContext, positions: np.ndarray, pred: Predictions, params: dict[str, Any],
                  aggregation: str | None, details: dict[str, Any] | None = None) -> RepeatOutcome:
    """Metrics at the task's level plus the prediction arrays stored with the job."""
    view = ctx.view
    y, groups = view.y[positions], view.groups[positions]
    metrics = evaluate(ctx.task.kind, ctx.task.level, y, groups, pred, aggregation)
    arrays: dict[str, np.ndarray] = {"y_true": y, "subjects": groups.astype(str)}
    if pred.classes is not None:
        arrays.update(y_prob=pred.values, y_pred=pred.labels, classes=pred.classes)
    else:
        arrays["y_pred"] = pred.values
    chosen = {**params, "aggregation": aggregation} if ctx.task.level == "subject" else dict(params)
    return RepeatOutcome(metrics=metrics, params=chosen, predictions=arrays, details=details or {})


_ABSENT = object()


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"search": {"n_trials": 12}}`` -> ``{"search.n_trials": 12}``."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


_PUBLISHED: dict[type, dict[str, Any] | None] = {}


def _published_settings(cls: type[Regime]) -> dict[str, Any] | None:
    """A regime class's settings at its defaults, flattened (built once per class, not once per job)."""
    if cls not in _PUBLISHED:
        try:
            _PUBLISHED[cls] = _flat(cls().settings())
        except Exception:  # noqa: BLE001 - a user regime with required arguments
            _PUBLISHED[cls] = None
    return _PUBLISHED[cls]


class Regime(Callback):
    """Base of every regime: ``name`` (job ids, summary), whether it ``uses_embeddings``, the task ``tiers``."""

    name: ClassVar[str] = "regime"
    uses_embeddings: ClassVar[bool] = True
    #: Whether the regime trains trials in Lightning trainers (the user's callbacks attach to those).
    trains_trials: ClassVar[bool] = False
    tiers: ClassVar[tuple[str, ...]] = ("primary", "secondary")
    #: Settings :meth:`deviations` does not list: speed settings, or labels of their own (the backend).
    not_protocol: ClassVar[tuple[str, ...]] = ()

    def applies_to(self, task: TaskSpec, encoder: PPGEncoder) -> bool:
        """Whether this regime evaluates ``encoder`` on ``task`` at all."""
        return task.tier in self.tiers

    def settings(self) -> dict[str, Any]:
        """Settings that change results (the run identity): public, non-callable attributes (Lightning adds ``log``)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and not callable(v)}

    def deviations(self) -> list[str]:
        """``key=value`` for each result setting that differs from the class defaults (empty if none can be built)."""
        published = _published_settings(type(self))
        if published is None:
            return []
        return [f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in _flat(self.settings()).items()
                if k.split(".")[0] not in self.not_protocol and published.get(k, _ABSENT) != v]

    def backend(self) -> str | None:
        """Compute backend recorded with results (e.g. ``sklearn`` or ``cuml``)."""
        return None

    def backend_for(self, kind: str) -> str | None:
        """The backend a task of this kind really runs on (what its record says; default :meth:`backend`)."""
        return self.backend()

    def check_trainer(self, trainer_kwargs: dict[str, Any]) -> None:
        """Refuse (``ConfigError``), before any job runs, device settings this regime cannot honour."""

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """Select, train and score on one outer fold."""
        raise NotImplementedError

    def run_group(self, ctxs: list[JobContext]) -> list[list[RepeatOutcome] | Exception]:
        """Several jobs of one (model, task), one after another: per job its outcomes or the exception it raised."""
        out: list[list[RepeatOutcome] | Exception] = []
        for ctx in ctxs:
            try:
                out.append(self.run(ctx))
            except Exception as exc:  # noqa: BLE001 - isolation: a job's failure is its own
                out.append(exc)
        return out
