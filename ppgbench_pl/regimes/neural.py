"""What the frozen MLP probe and finetuning share: holdout repeats, targets, selection, the Optuna search.

Per outer fold (PROTOCOL.md 3.3): subject-level tasks run 3 repeats (r = seed, seed+1009, seed+2018),
others 1. Each repeat splits the outer-training groups into a holdout-fit part and 20 % validation
groups, builds loss targets and class weights from the fit part, searches with Optuna TPE + Hyperband
(one persistent study per repeat), takes the best complete trial's best-epoch weights (never refit,
unless ``refit=True``), and scores them on the outer test fold with the aggregation the trial selected.

Every trial is trained inside ``Trainer.fit`` of one :class:`~ppgbench_pl.hpo.trial_stack.TrialStack`: the
studies of all repeats of a job (or of a group of jobs, :meth:`NeuralRegime.run_group`) search side by
side. What a trial is, is the regime's business (:class:`TrialFactory`): a head on cached embeddings
(:mod:`ppgbench_pl.regimes.mlp`) or encoder + head (:mod:`ppgbench_pl.regimes.finetune`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import lightning as L
import numpy as np
from optuna.trial import FrozenTrial
from scipy.special import expit, softmax

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.errors import ConfigError, DataError
from ppgbench_pl.hpo.optuna_search import (
    PersistentStudy,
    SearchSettings,
    best_trial,
    close_storage,
    open_storage,
    storage_url,
    study_record,
)
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, build_space
from ppgbench_pl.hpo.stack_search import StackSearch, StudyPlan, fixed_epochs, snapshot
from ppgbench_pl.hpo.trial_stack import Slot, TrialStack
from ppgbench_pl.hpo.trial_store import TrialWeights
from ppgbench_pl.metrics.aggregation import candidates, first_per_group
from ppgbench_pl.metrics.scores import Predictions, selection_score
from ppgbench_pl.probes.search import subject_predictions
from ppgbench_pl.regimes.base import (
    JobContext,
    Regime,
    RepeatOutcome,
    frozen_parts_expected,
    interrupts_pass_through,
    score_outcome,
)

ClassWeighting = Literal["balanced", "none"]


@dataclass(frozen=True)
class Targets:
    """How labels become loss targets and head outputs become predictions.

    Attributes:
        kind: Task kind.
        classes: Outer-training classes, sorted (classification), else ``None``.
        loss: ``mse`` (regression), ``bce`` (binary: one logit), ``ce`` (multiclass: K logits).
        n_outputs: Head outputs.
        class_weight: ``[n_neg / n_pos]`` (bce) or ``n / (K n_k)`` per class (ce); ``None`` unweighted.
        y_mean: Regression targets are trained as ``(y - y_mean) / y_scale`` (0 and 1: raw, as published).
        y_scale: See ``y_mean``.

    """

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
    """Targets from the outer-training classes, class weights counted on the fit part.

    Binary vs multiclass is inferred from the outer-training labels (exactly 2 classes: binary). Class
    counts are per subject on subject-level tasks, else per window. With ``standardize_targets`` a
    regression head learns z-scored targets (mean and std of the fit part; a std of 0 becomes 1), which
    the published protocol does not do: raw targets in the tens (heart rate, blood pressure) take many
    epochs to reach from a head that starts near 0.

    Raises:
        DataError: Fewer than 2 outer-training classes, or a class missing from the fit part (an error in
            the published code too; here the job fails with this reason, PROTOCOL.md 10 item 7).

    """
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
        pred, y = self.targets.predictions(outputs), self.y
        if self.aggregations:
            pred = subject_predictions(pred, self.groups, self.aggregations[aggregation_idx or 0])
            y = first_per_group(self.groups, self.y)
        return selection_score(self.targets.kind, y, pred, self.binary_metric)

    @property
    def metric_name(self) -> str:
        """Name of the metric maximised."""
        if self.targets.loss == "mse":
            return "neg_mae"
        return self.binary_metric if self.targets.loss == "bce" else "balanced_accuracy"

    def check_defined(self, where: str) -> None:
        """Fail early when no trial could ever be scored (e.g. AUROC on a one-class validation part).

        Raises:
            DataError: The score of constant outputs is undefined on the validation part.

        """
        if not np.isfinite(self(np.zeros((len(self.y), self.targets.n_outputs)))):
            raise DataError(f"{where}: selection metric {self.metric_name} is undefined on the validation "
                            f"holdout (classes present: {np.unique(self.y).tolist()})")


@dataclass(frozen=True)
class Split:
    """Positions (into the task view) a repeat trains, validates and tests on."""

    fit: np.ndarray
    val: np.ndarray | None
    test: np.ndarray


class TrialFactory(Protocol):
    """What a neural regime builds per repeat: its trials' slots and the winner's predictions."""

    #: The protocol search space (before user overrides and the aggregation parameter).
    space: dict[str, list[Any]]
    #: What the regime records with each repeat (mode, device, ...).
    details: dict[str, Any]

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
    """One repeat of one job: its split, targets, selection score, factory and study."""

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

    @property
    def key(self) -> str:
        """The study's key in a stack."""
        return f"{self.ctx.job_id}/repeat{self.repeat}"


class NeuralRegime(Regime):
    """Base of the Optuna-searched regimes; subclasses provide :meth:`make_factory` and their defaults.

    Lightning hooks (of the stack trainer this regime runs, :mod:`ppgbench_pl.hpo.trial_stack`):
    ``on_train_epoch_end`` scores every trial's validation epoch, reports to Optuna, prunes, and refills the
    stack from each study (:class:`~ppgbench_pl.hpo.stack_search.StackSearch`); a fixed-length fit (refit)
    ends its slots at their budget there.

    Args:
        search: The Optuna budget (:class:`~ppgbench_pl.hpo.SearchSettings`); unset ``max_epochs`` and
            ``parallel_trials`` take the regime's published values.
        refit: Retrain the winner on all outer-training groups for its best epoch count (deviation;
            published: False, the 80 % model is tested).
        class_weighting: ``balanced`` (published) or ``none``.
        binary_selection_metric: ``auroc`` or ``balanced_accuracy`` for binary tasks (default per regime).
        subject_repeats: Holdout repeats on subject-level tasks (3 published).
        search_space: Replacement value lists for some parameters of the protocol space.
        eval_batch_size: Batch size for validation and test inference.
        standardize_targets: Train regression heads on z-scored targets (not published).

    """

    uses_embeddings = True
    trains_trials = True
    tiers = ("primary",)
    default_binary_metric: ClassVar[str] = "auroc"
    #: Published epoch budget and trials trained together of this regime.
    default_max_epochs: ClassVar[int] = 25
    default_parallel_trials: ClassVar[int] = 1

    def __init__(self, search: SearchSettings | None, refit: bool, class_weighting: ClassWeighting,
                 binary_selection_metric: str | None, subject_repeats: int,
                 search_space: dict[str, list[Any]] | None, eval_batch_size: int,
                 standardize_targets: bool = False) -> None:
        if class_weighting not in ("balanced", "none"):
            raise ConfigError(f"class_weighting must be 'balanced' or 'none', got {class_weighting!r}")
        metric = binary_selection_metric or self.default_binary_metric
        if metric not in ("auroc", "balanced_accuracy"):
            raise ConfigError(f"binary_selection_metric must be 'auroc' or 'balanced_accuracy', "
                              f"got {metric!r}")
        if subject_repeats < 1 or eval_batch_size < 1:
            raise ConfigError("subject_repeats and eval_batch_size must be >= 1")
        if isinstance(search, dict):  # a plain mapping from Python callers
            search = SearchSettings(**search)
        self.search = (search or SearchSettings()).resolved(self.default_max_epochs, self.default_parallel_trials)
        self.refit, self.class_weighting, self.binary_selection_metric = refit, class_weighting, metric
        self.subject_repeats, self.search_space = subject_repeats, search_space
        self.eval_batch_size = eval_batch_size
        self.standardize_targets = standardize_targets

    def settings(self) -> dict[str, Any]:
        """Result-relevant settings: the search budget as a plain mapping, without its storage location."""
        out = super().settings()
        out["search"] = self.search.identity()
        return out

    @property
    def max_epochs(self) -> int:
        """The resolved epoch budget."""
        return self.search.epochs

    def check_trainer(self, trainer_kwargs: dict[str, Any]) -> None:
        """A stack trains on one device in this process: several devices or a process-launching strategy are refused.

        The search state (Optuna studies, best weights) lives in the fitting process and the width comes from
        the studies, so data parallelism across devices has nothing to add and a spawned process would take
        the search with it.
        """
        strategy = str(trainer_kwargs.get("strategy") or "auto")
        if strategy not in ("auto", "single_device"):
            raise ConfigError(f"trainer.strategy {strategy}: the {self.name} regime trains its trials as one stack "
                              "on one device in this process; leave trainer.strategy out (auto)")
        devices = trainer_kwargs.get("devices", 1)
        if devices in ("auto", -1, "-1") or (isinstance(devices, int) and devices > 1) or (
                isinstance(devices, list) and len(devices) > 1):
            raise ConfigError(f"trainer.devices {devices!r}: the {self.name} regime trains its trials as one "
                              "stack on one device; set trainer.devices: 1 (use an executor with one GPU per "
                              "worker to use several)")

    def precision(self, ctx: JobContext) -> str:
        """The stack trainer's precision (``trainer.precision`` when given)."""
        return str(ctx.trainer_kwargs.get("precision") or "32-true")

    def make_factory(self, ctx: JobContext, split: Split, targets: Targets, seed: int) -> TrialFactory:
        """What trains this regime's trials on one split."""
        raise NotImplementedError

    def make_trainer(self, ctx: JobContext, **overrides: Any) -> L.Trainer:
        """A stack trainer: the run's device settings, the user's callbacks, then this regime (last)."""
        return ctx.make_trainer([*ctx.callbacks, self], precision=self.precision(ctx), **overrides)

    # -- Lightning hooks -------------------------------------------------------------------------
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The search step after every epoch: score, report, prune, refill (or end fixed-length slots)."""
        if not isinstance(pl_module, TrialStack):
            return
        search = getattr(pl_module, "search", None)
        if isinstance(search, StackSearch):
            search.end_epoch(trainer, pl_module)
        else:
            fixed_epochs(trainer, pl_module)

    # -- one job, or a group of jobs searched in one stack ----------------------------------------
    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """All repeats of one outer fold."""
        return self.run_group([ctx])[0]

    def run_group(self, ctxs: Sequence[JobContext]) -> list[list[RepeatOutcome]]:
        """The repeats of several jobs of one (model, task) searched side by side in one stack."""
        searches = [self.repeat_search(ctx, k) for ctx in ctxs
                    for k in range(self.subject_repeats if ctx.task.level == "subject" else 1)]
        try:
            plans = [self.open_plan(s) for s in searches]
            self.fit_stack(ctxs[0], StackSearch(plans))
            records = {s.key: study_record(s.study.study) for s in searches if s.study is not None}
            winners = {s.key: self.winner(s) for s in searches}
        finally:
            for s in searches:
                if s.storage is not None:
                    close_storage(s.storage)
        out: dict[str, list[RepeatOutcome]] = {ctx.job_id: [] for ctx in ctxs}
        for s in searches:
            out[s.ctx.job_id].append(self.score_winner(s, *winners[s.key], records[s.key]))
        return [out[ctx.job_id] for ctx in ctxs]

    def repeat_search(self, ctx: JobContext, repeat: int) -> RepeatSearch:
        """Holdout, targets, selection score and trial factory of one repeat (nothing trained yet)."""
        view = ctx.view
        outer, test = ctx.outer()
        fit, val = ctx.holdout(repeat)
        r, where = ctx.seed + 1009 * repeat, f"seed {ctx.seed} fold {ctx.fold} repeat {repeat}"
        targets = make_targets(ctx.task, view.y[outer], view.y[fit], view.groups[fit], self.class_weighting,
                               where, self.standardize_targets)
        aggregations = candidates(ctx.task.kind) if ctx.task.level == "subject" else ()
        scorer = SelectionScorer(targets, view.y[val], view.groups[val], self.binary_selection_metric,
                                 aggregations)
        scorer.check_defined(f"task {ctx.task.name} ({where})")
        split = Split(fit, val, test)
        return RepeatSearch(ctx, repeat, r, split, targets, scorer, aggregations,
                            self.make_factory(ctx, split, targets, r))

    def open_plan(self, s: RepeatSearch) -> StudyPlan:
        """Open the repeat's study (resuming its finished trials) and its weights folder."""
        s.url = storage_url(self.search.storage, s.ctx.work_dir, s.ctx.job_id, s.repeat)
        s.storage = open_storage(s.url)
        s.study = PersistentStudy(s.storage, f"{s.ctx.job_id}-repeat{s.repeat}", self.search, seed=s.seed)
        s.weights = store = TrialWeights(s.ctx.work_dir / f"repeat{s.repeat}")
        study = s.study

        def keep_if_best(number: int, value: float, weights: dict[str, Any]) -> None:
            store.offer(study.study, number, value, weights)

        def make_slot(key: str, number: int, params: Mapping[str, Any]) -> Slot:
            return s.factory.slot(f"{key}/{number}", params, s.seed + number, self.max_epochs, validate=True)

        def score(out: np.ndarray, params: Mapping[str, Any]) -> float:
            return s.scorer(out, params.get(AGGREGATION_PARAM))

        space = build_space(s.factory.space, self.search_space, s.aggregations)
        return StudyPlan(s.key, study, space, make_slot, score, self.max_epochs, keep_if_best)

    def fit_stack(self, ctx: JobContext, search: StackSearch | None, slots: list[Slot] | None = None) -> None:
        """One ``Trainer.fit`` of a stack until every study's budget is spent (or every fixed slot ended)."""
        first = search.first_slots() if search is not None else list(slots or [])
        if not first:
            return
        module = TrialStack(first, eval_batch_size=self.eval_batch_size)
        module.search = search
        trainer = self.make_trainer(ctx, max_epochs=-1, limit_val_batches=1.0)
        try:
            with frozen_parts_expected(), interrupts_pass_through():
                trainer.fit(module)
        except BaseException:
            if search is not None:
                search.abandon()
            raise

    def winner(self, s: RepeatSearch) -> tuple[FrozenTrial, dict[str, Any] | None]:
        """The best complete trial and its stored best-epoch weights."""
        assert s.study is not None and s.weights is not None
        best = best_trial(s.study.study)
        s.weights.keep_best(s.study.study, best.number)
        return best, s.weights.load(best.number)

    def train_fixed(self, s: RepeatSearch, factory: TrialFactory, params: Mapping[str, Any], seed: int,
                    epochs: int) -> dict[str, Any]:
        """Train one network for ``epochs`` epochs on a factory's fit part (refit, or a lost weights file)."""
        slot = factory.slot(f"{s.key}/fixed", params, seed, epochs, validate=False)
        self.fit_stack(s.ctx, None, [slot])
        return snapshot(slot.net)

    def score_winner(self, s: RepeatSearch, best: FrozenTrial, weights: dict[str, Any] | None,
                     record: dict[str, Any]) -> RepeatOutcome:
        """Winner's test predictions and metrics, with what the record says about the search."""
        ctx, view = s.ctx, s.ctx.view
        outer, test = ctx.outer()
        params, epochs = dict(best.params), int(best.user_attrs["best_epoch"])
        targets, factory, source = s.targets, s.factory, "best epoch of the winning trial"
        where = f"seed {ctx.seed} fold {ctx.fold} repeat {s.repeat}"
        if self.refit:
            targets = make_targets(ctx.task, view.y[outer], view.y[outer], view.groups[outer],
                                   self.class_weighting, where, self.standardize_targets)
            factory = self.make_factory(ctx, Split(outer, None, test), targets, s.seed)
            weights, source = self.train_fixed(s, factory, params, s.seed + best.number, epochs), \
                "refit on outer training"
        elif weights is None:  # deleted or never written (e.g. killed between saving and telling)
            weights = self.train_fixed(s, factory, params, s.seed + best.number, epochs)
            source = "retrained: weights file missing"
        pred = targets.predictions(factory.predict(params, weights, test))
        aggregation = s.aggregations[int(params.pop(AGGREGATION_PARAM))] if s.aggregations else None
        fit, val = s.split.fit, s.split.val
        assert val is not None
        details = {
            "holdout_seed": s.seed,
            "holdout": {"fit_groups": len(np.unique(view.groups[fit])),
                        "val_groups": len(np.unique(view.groups[val])), "fit_windows": len(fit),
                        "val_windows": len(val)},
            "selection_metric": s.scorer.metric_name, "loss": targets.loss,
            "class_weight": targets.class_weight, "class_weighting": self.class_weighting,
            "refit": self.refit, "engine": factory.details,
            "callbacks": [type(c).__name__ for c in ctx.callbacks],
            "winner": {"trial": best.number, "value": best.value, "best_epoch": epochs, "weights": source},
            "optuna": {**record, "storage": redact(s.url), "budget": self.search.n_trials,
                       "parallel_trials": self.search.batch, "max_epochs": self.search.epochs},
        }
        return score_outcome(ctx, test, pred, {**params, "epochs": epochs}, aggregation, details)
