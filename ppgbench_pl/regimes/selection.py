"""One holdout repeat's search in the neural regimes: loss targets, selection scores, split, search state."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import torch
from scipy.special import expit, softmax
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.functional.regression import mean_absolute_error
from torchmetrics.utilities import dim_zero_cat

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.errors import DataError
from ppgbench_pl.heads.metrics import BalancedAccuracy
from ppgbench_pl.hpo.optuna_search import PersistentStudy
from ppgbench_pl.hpo.trial_stack import Slot
from ppgbench_pl.hpo.trial_store import TrialWeights
from ppgbench_pl.metrics.aggregation import first_per_group
from ppgbench_pl.metrics.scores import Predictions, auroc, selection_score
from ppgbench_pl.probes.search import subject_predictions
from ppgbench_pl.regimes.base import JobContext

ClassWeighting = Literal["balanced", "none"]


@dataclass(frozen=True)
class Targets:
    """Labels -> loss targets (``mse``; ``bce``: one logit, weight ``[n_neg / n_pos]``; ``ce``: K, ``n / (K n_k)``)."""

    kind: str
    classes: np.ndarray | None
    loss: Literal["mse", "bce", "ce"]
    n_outputs: int
    class_weight: list[float] | None = None
    y_mean: float | np.ndarray = 0.0
    y_scale: float | np.ndarray = 1.0

    def encode(self, y: np.ndarray) -> np.ndarray:
        """Loss targets: (scaled) float values, float 0/1 (bce) or class indices (ce)."""
        if self.loss == "mse":
            return ((np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_scale).astype(np.float32)
        assert self.classes is not None
        index = np.searchsorted(self.classes, y)
        return index.astype(np.float32) if self.loss == "bce" else index.astype(np.int64)

    def predictions(self, outputs: np.ndarray) -> Predictions:
        """Regression values, or probabilities: sigmoid as ``[1 - p, p]`` (binary), softmax (multiclass)."""
        out = np.asarray(outputs, dtype=np.float64)
        if self.loss == "mse":
            out = out * np.reshape(self.y_scale, (1, -1)) + np.reshape(self.y_mean, (1, -1))
            return Predictions(self.kind, out[:, 0] if self.n_outputs == 1 else out)
        if self.loss == "bce":
            p = expit(out[:, 0])
            return Predictions(self.kind, np.stack([1 - p, p], axis=1), self.classes)
        return Predictions(self.kind, softmax(out, axis=1), self.classes)


def make_targets(task: TaskSpec, y_outer: np.ndarray, y_fit: np.ndarray, groups_fit: np.ndarray,
                 class_weighting: ClassWeighting, where: str, standardize_targets: bool = False) -> Targets:
    """Targets of the outer-training classes, class weights of the fit part (a class missing there: ``DataError``)."""
    if task.kind != "classification":
        if not standardize_targets:
            return Targets(task.kind, None, "mse", task.n_targets)
        fit = np.asarray(y_fit, dtype=np.float64).reshape(len(y_fit), -1)
        mean, std = fit.mean(axis=0), fit.std(axis=0)
        return Targets(task.kind, None, "mse", task.n_targets, None, mean, np.where(std == 0, 1.0, std))
    classes = np.unique(y_outer)
    if len(classes) < 2:
        raise DataError(f"task {task.name} ({where}): the outer-training set holds only class "
                        f"{classes.tolist()}")
    labels = first_per_group(groups_fit, y_fit) if task.level == "subject" else y_fit
    counts = np.array([(labels == c).sum() for c in classes], dtype=np.float64)
    if (counts == 0).any():
        missing = classes[counts == 0].tolist()
        raise DataError(f"task {task.name} ({where}): class(es) {missing} of the outer-training set are "
                        "missing from the holdout-train part, so the head could never learn them")
    balanced = class_weighting == "balanced"
    if len(classes) == 2:
        return Targets(task.kind, classes, "bce", 1, [counts[0] / counts[1]] if balanced else None)
    weight = (counts.sum() / (len(classes) * counts)).tolist() if balanced else None
    return Targets(task.kind, classes, "ce", len(classes), weight)


@dataclass(frozen=True)
class SelectionScorer:
    """The selection score of validation outputs, with the trial's subject aggregation (PROTOCOL.md 2, 6)."""

    targets: Targets
    y: np.ndarray
    groups: np.ndarray
    binary_metric: str
    aggregations: tuple[str, ...] = ()

    def __call__(self, outputs: np.ndarray, aggregation_idx: int | None = None) -> float:
        """Higher is better: -MAE, AUROC or balanced accuracy."""
        return selection_score(self.targets.kind, *self.scored(outputs, aggregation_idx), self.binary_metric)

    def scored(self, outputs: np.ndarray, aggregation_idx: int | None) -> tuple[np.ndarray, Predictions]:
        """(labels, predictions) to score, per subject with the trial's aggregation on subject-level tasks."""
        pred, y = self.targets.predictions(outputs), self.y
        if self.aggregations:
            pred = subject_predictions(pred, self.groups, self.aggregations[aggregation_idx or 0])
            y = first_per_group(self.groups, self.y)
        return y, pred

    @property
    def metric_name(self) -> str:
        """Name of the metric maximised."""
        if self.targets.loss == "mse":
            return "neg_mae"
        return self.binary_metric if self.targets.loss == "bce" else "balanced_accuracy"

    def check_defined(self, where: str) -> None:
        """Fail early (``DataError``) when no trial could ever be scored (e.g. AUROC on one validation class)."""
        if not np.isfinite(self(np.zeros((len(self.y), self.targets.n_outputs)))):
            raise DataError(f"{where}: selection metric {self.metric_name} is undefined on the validation "
                            f"holdout (classes present: {np.unique(self.y).tolist()})")


@dataclass(frozen=True)
class Split:
    """Positions (into the task view) a repeat trains, validates and tests on."""

    fit: np.ndarray
    val: np.ndarray | None
    test: np.ndarray


class SelectionMetric(Metric):
    """A trial's selection score over one validation epoch (:class:`SelectionScorer`'s, tested; NaN if not finite)."""

    full_state_update = False
    higher_is_better = True
    outputs: list[Tensor]

    def __init__(self, scorer: SelectionScorer, aggregation_idx: int | None = None) -> None:
        super().__init__()
        self.scorer, self.aggregation_idx = scorer, aggregation_idx
        self.add_state("outputs", default=[], dist_reduce_fx="cat")

    def update(self, outputs: Tensor) -> None:
        """Add a chunk of validation outputs (rows in validation order)."""
        self.outputs.append(outputs.detach().float())

    def compute(self) -> Tensor:
        """The selection score of everything gathered since the last reset (higher is better)."""
        out = dim_zero_cat(self.outputs).double().cpu().numpy()
        if not np.isfinite(out).all():
            return torch.tensor(float("nan"), dtype=torch.float64)
        scorer = self.scorer
        y, pred = scorer.scored(out, self.aggregation_idx)
        if scorer.targets.loss == "mse":
            values = torch.as_tensor(np.asarray(pred.values, dtype=np.float64))
            truth = torch.as_tensor(np.asarray(y, dtype=np.float64)).reshape(values.shape)
            return -mean_absolute_error(values, truth)
        classes = pred.classes
        assert classes is not None
        if len(classes) == 2 and scorer.binary_metric == "auroc":
            # torchmetrics' AUROC accumulates in float32 (relative error ~1e-7), enough to reorder two trials
            # on a large validation set; the exact rank-sum AUROC (scikit-learn's value) keeps the selection
            return torch.tensor(auroc(np.asarray(y) == classes[1], pred.values[:, 1]), dtype=torch.float64)
        recall = BalancedAccuracy(len(classes))
        recall.update(torch.as_tensor(np.searchsorted(classes, pred.labels)),
                      torch.as_tensor(np.searchsorted(classes, y)))
        return recall.compute().double()


class TrialFactory(Protocol):
    """What a neural regime builds per repeat: its trials' slots and the winner's predictions."""

    #: The protocol search space (before user overrides and the aggregation parameter).
    space: dict[str, list[Any]]
    #: What the regime records with each repeat (mode, device, ...).
    details: dict[str, Any]
    #: The search's study, set when it opens (finetuning replays its head stream with the study's trials).
    study: Any

    def slot(self, name: str, params: Mapping[str, Any], seed: int, epochs: int, validate: bool) -> Slot:
        """A trial's slot: its network, rows (fit part; validation rows if ``validate``), groups, batches."""
        ...

    def predict(self, params: Mapping[str, Any], weights: dict[str, Any], positions: np.ndarray) -> np.ndarray:
        """Raw head outputs of a trained network for some view positions."""
        ...


def redact(url: str) -> str:
    """A storage URL without credentials (it goes into job records)."""
    return re.sub(r"//[^/@]*@", "//***@", url)


@dataclass
class RepeatSearch:
    """One search of one job: its repeat's split, targets, scorer, factory, study; ``seed``: its streams' seed."""

    ctx: JobContext
    repeat: int
    seed: int
    split: Split
    targets: Targets
    scorer: SelectionScorer
    aggregations: tuple[str, ...]
    factory: TrialFactory
    url: str = ""
    storage: Any = None
    study: PersistentStudy | None = None
    weights: TrialWeights | None = None
    search_seed: int = 0

    @property
    def key(self) -> str:
        """The study's key in a stack."""
        return f"{self.ctx.job_id}/repeat{self.repeat}" + (f"/search{self.search_seed}" if self.search_seed else "")

    @property
    def folder(self) -> str:
        """The search's folder in the job's work folder (study storage and weights)."""
        return f"repeat{self.repeat}" + (f"_search{self.search_seed}" if self.search_seed else "")
