"""A regime is a Lightning callback that knows how to train and select a head on one outer fold.

The runner hands every job to the regime as a :class:`JobContext`; the regime returns one
:class:`RepeatOutcome` per repeat (1, or 3 for subject-level tasks in neural regimes). Adding a regime
means subclassing :class:`Regime`, implementing :meth:`Regime.run`, and listing the class under
``trainer.callbacks`` in a YAML file; as a callback it also receives the hooks of the inner trainers
it builds (``callbacks=[self, ...]``), which is where per-epoch logging or pruning plugs in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import numpy as np
from lightning.pytorch.callbacks import Callback

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.data.task_data import TaskView
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.metrics.scores import Predictions


@dataclass
class JobContext:
    """Everything one job (model, task, regime, seed, outer fold) needs."""

    job_id: str
    model_name: str
    encoder: PPGEncoder
    task: TaskSpec
    seed: int
    fold: int
    datamodule: PPGDataModule
    #: Persistent per-job folder (Optuna storage lives here, so an interrupted search resumes).
    work_dir: Path
    embeddings: np.ndarray | None = None
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def fs(self) -> float:
        """The encoder's rate, at which the data are served."""
        return float(self.encoder.sampling_rate)

    def view(self) -> TaskView:
        """The task's valid rows at the encoder's rate."""
        return self.datamodule.task_view(self.fs, self.task)

    def outer(self) -> tuple[np.ndarray, np.ndarray]:
        """(outer-training positions, outer test positions) into :meth:`view`."""
        return self.datamodule.outer_fold(self.view(), self.seed, self.fold)

    def make_trainer(self, callbacks: list[Callback], **overrides: Any) -> L.Trainer:
        """An inner trainer: the run's device settings, no logger or checkpoints unless overridden."""
        kwargs = {
            "logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
            "enable_model_summary": False, "num_sanity_val_steps": 0, **self.trainer_kwargs, **overrides,
        }
        return L.Trainer(callbacks=callbacks, **kwargs)


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
    view = ctx.view()
    y, groups = view.y[positions], view.groups[positions]
    metrics = evaluate(ctx.task.kind, ctx.task.level, y, groups, pred, aggregation)
    arrays: dict[str, np.ndarray] = {"y_true": y, "subjects": groups.astype(str)}
    if pred.classes is not None:
        arrays.update(y_prob=pred.values, y_pred=pred.labels, classes=pred.classes)
    else:
        arrays["y_pred"] = pred.values
    chosen = {**params, "aggregation": aggregation} if ctx.task.level == "subject" else dict(params)
    return RepeatOutcome(metrics=metrics, params=chosen, predictions=arrays, details=details or {})


class Regime(Callback):
    """Base of every regime (linear, rf, mlp, finetune, and user-defined ones).

    Class attributes:
        name: The regime name used in job ids and the summary.
        uses_embeddings: True when the regime trains on cached frozen embeddings.
        tiers: Task tiers the regime runs on (secondary tasks run under linear and RF only).
    """

    name: ClassVar[str] = "regime"
    uses_embeddings: ClassVar[bool] = True
    tiers: ClassVar[tuple[str, ...]] = ("primary", "secondary")

    def applies_to(self, task: TaskSpec, encoder: PPGEncoder) -> bool:
        """Whether this regime evaluates ``encoder`` on ``task`` at all."""
        return task.tier in self.tiers

    def settings(self) -> dict[str, Any]:
        """Settings that change results: part of the run identity.

        Private and callable attributes are left out (Lightning attaches ``log``/``log_dict`` to a
        callback once it has run, which must not change the identity).
        """
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and not callable(v)}

    def backend(self) -> str | None:
        """Compute backend recorded with results (e.g. ``sklearn`` or ``cuml``)."""
        return None

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """Select, train and score on one outer fold."""
        raise NotImplementedError
