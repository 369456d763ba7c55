"""What the Optuna-searched regimes share: holdout repeats r = seed + 1009 k (PROTOCOL.md 3.3), the search, scoring."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

import lightning as L
import numpy as np
from lightning.pytorch.callbacks import Callback

from ppgbench_pl.errors import ConfigError, DataError
from ppgbench_pl.hpo.optuna_search import (
    PersistentStudy,
    SearchFailed,
    SearchSettings,
    best_trial,
    close_storage,
    open_storage,
    storage_url,
    study_record,
)
from ppgbench_pl.hpo.per_trial import fit_each_trial, per_trial_note, stack_aware
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, build_space
from ppgbench_pl.hpo.stack_search import StackSearch, StudyPlan, fixed_epochs, snapshot
from ppgbench_pl.hpo.trial_stack import Slot, TrialStack
from ppgbench_pl.hpo.trial_store import TrialWeights
from ppgbench_pl.metrics.aggregation import candidates
from ppgbench_pl.regimes.base import (
    JobContext,
    Regime,
    RepeatOutcome,
    frozen_parts_expected,
    interrupts_pass_through,
    score_outcome,
)
from ppgbench_pl.regimes.search_seeds import PUBLISHED_SEARCH_SEEDS, check_search_seeds, search_rng_seed, seed_search
from ppgbench_pl.regimes.selection import (
    ClassWeighting,
    RepeatSearch,
    SelectionMetric,
    SelectionScorer,
    Split,
    Targets,
    TrialFactory,
    make_targets,
    redact,
)
from ppgbench_pl.tasks.encoder_task import set_batchnorm_eval


class NeuralRegime(Regime):
    """Base of the Optuna-searched regimes (subclasses: :meth:`make_factory`), a callback of its trials' trainers.

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
        stack_jobs: Jobs of one (model, task) (the seeds and folds of a cell) whose searches train side by
            side in one stack; a speed setting, not a result setting (default per regime).
        search_seeds: Search seeds per repeat (:mod:`ppgbench_pl.regimes.search_seeds`): ``[0]`` (published,
            one search) or e.g. ``[0, 1, 2]``, which repeats each search with other random streams on the
            same split to measure search noise (search seed 0 stays the reported one).
    """

    trains_trials = True
    not_protocol = ("eval_batch_size", "search_seeds")  # evaluation chunks; searches beside the reported one
    tiers = ("primary",)
    default_binary_metric: ClassVar[str] = "auroc"
    #: Published epoch budget and trials trained together of this regime.
    default_max_epochs: ClassVar[int] = 25
    default_parallel_trials: ClassVar[int] = 1
    #: Jobs of one (model, task) whose studies the runner trains in one stack (a speed setting).
    default_stack_jobs: ClassVar[int] = 1

    def __init__(self, search: SearchSettings | None = None, refit: bool = False,
                 class_weighting: ClassWeighting = "balanced", binary_selection_metric: str | None = None,
                 subject_repeats: int = 3, search_space: dict[str, list[Any]] | None = None,
                 eval_batch_size: int = 4096, standardize_targets: bool = False, stack_jobs: int | None = None,
                 search_seeds: list[int] | None = None) -> None:
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
        self.stack_jobs = self.default_stack_jobs if stack_jobs is None else int(stack_jobs)
        if self.stack_jobs < 1:
            raise ConfigError(f"stack_jobs must be >= 1, got {stack_jobs}")
        self.search_seeds = check_search_seeds(search_seeds)

    def settings(self) -> dict[str, Any]:
        """Result settings: the search without storage; no ``stack_jobs``; ``search_seeds`` unless ``[0]``."""
        out = super().settings()
        out["search"] = self.search.identity()
        out.pop("stack_jobs", None)
        if self.search_seeds == list(PUBLISHED_SEARCH_SEEDS):
            out.pop("search_seeds", None)
        return out

    def backend(self) -> str:
        """The trial engine."""
        return "lightning-trial-stack"

    def check_trainer(self, trainer_kwargs: dict[str, Any]) -> None:
        """A stack trains on one device in this process (``ConfigError`` for several devices or processes)."""
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

    # -- Lightning hooks of the trainers that fit its trials (after the user's callbacks) ------------------
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The first epoch's modes of every trial."""
        if isinstance(pl_module, TrialStack):
            self.train_modes(pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The search step (score, report, prune, refill; or end fixed-length slots), then the next epoch's modes."""
        if not isinstance(pl_module, TrialStack):
            return
        search = getattr(pl_module, "search", None)  # a StackSearch, or per_trial.TrialEpochs of one trial
        if search is not None:
            search.end_epoch(trainer, pl_module)
        else:
            fixed_epochs(trainer, pl_module)
        self.train_modes(pl_module)

    def train_modes(self, pl_module: TrialStack) -> None:
        """Each trial's train/eval and BatchNorm modes, set after the epoch so callbacks' changes hold."""
        for slot in pl_module.slots.values():
            slot.net.train(slot.training)
            if slot.freeze_stats:
                set_batchnorm_eval(slot.net)

    # -- one job, or a group of jobs searched in one stack ----------------------------------------
    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """All repeats of one outer fold."""
        (result,) = self.run_group([ctx])
        if isinstance(result, Exception):
            raise result
        return result

    def run_group(self, ctxs: Sequence[JobContext]) -> list[list[RepeatOutcome] | Exception]:
        """Several jobs of one (model, task) in one stack; a job whose split or search fails fails alone."""
        failed: dict[str, Exception] = {}
        searches: list[RepeatSearch] = []
        for ctx in ctxs:
            try:
                for k in range(self.subject_repeats if ctx.task.level == "subject" else 1):
                    first = self.repeat_search(ctx, k)
                    searches += [first, *(seed_search(first, s, self.make_factory) for s in self.search_seeds if s)]
            except Exception as exc:  # noqa: BLE001 - isolation: this job fails, the others run
                failed[ctx.job_id] = exc
        out: dict[str, list[RepeatOutcome]] = {ctx.job_id: [] for ctx in ctxs}
        try:
            plans = [self.open_plan(s) for s in searches]
            self.fit_stack(ctxs[0], StackSearch(plans))
            for s in searches:
                if s.ctx.job_id in failed:
                    continue
                try:
                    out[s.ctx.job_id].append(self.score_winner(s))
                except Exception as exc:  # noqa: BLE001 - e.g. no trial of this job's search completed
                    failed[s.ctx.job_id] = exc
        finally:
            for s in searches:
                if s.storage is not None:
                    close_storage(s.storage)
        return [failed.get(ctx.job_id) or out[ctx.job_id] for ctx in ctxs]

    def repeat_search(self, ctx: JobContext, repeat: int, search_seed: int = 0) -> RepeatSearch:
        """Holdout (the repeat's), targets, selection score and trial factory of one search (nothing trained yet)."""
        view = ctx.view
        outer, test = ctx.outer()
        fit, val = ctx.holdout(repeat)
        r = search_rng_seed(ctx.seed + 1009 * repeat, search_seed)
        where = f"seed {ctx.seed} fold {ctx.fold} repeat {repeat}" + (
            f" search seed {search_seed}" if search_seed else "")
        targets = make_targets(ctx.task, view.y[outer], view.y[fit], view.groups[fit], self.class_weighting,
                               where, self.standardize_targets)
        aggregations = candidates(ctx.task.kind) if ctx.task.level == "subject" else ()
        scorer = SelectionScorer(targets, view.y[val], view.groups[val], self.binary_selection_metric,
                                 aggregations)
        scorer.check_defined(f"task {ctx.task.name} ({where})")
        split = Split(fit, val, test)
        return RepeatSearch(ctx, repeat, r, split, targets, scorer, aggregations,
                            self.make_factory(ctx, split, targets, r), search_seed=search_seed)

    def open_plan(self, s: RepeatSearch) -> StudyPlan:
        """Open the repeat's study (resuming its finished trials) and its weights folder."""
        s.url = storage_url(self.search.storage, s.ctx.work_dir, s.ctx.job_id, s.repeat, s.search_seed)
        s.storage = open_storage(s.url)
        name = f"{s.ctx.job_id}-repeat{s.repeat}" + (f"-search{s.search_seed}" if s.search_seed else "")
        space = build_space(s.factory.space, self.search_space, s.aggregations)
        s.study = study = PersistentStudy(s.storage, name, self.search, seed=s.seed, space=space)
        s.factory.study = study.study  # finetuning replays its head stream with the study's trials (a resume)
        s.weights = store = TrialWeights(s.ctx.work_dir / s.folder)

        def make_slot(key: str, number: int, params: Mapping[str, Any]) -> Slot:
            slot = s.factory.slot(f"{key}/{number}", params, s.seed + number, self.search.epochs, validate=True)
            slot.metric = SelectionMetric(s.scorer, params.get(AGGREGATION_PARAM))
            return slot

        return StudyPlan(s.key, study, space, make_slot, lambda out, p: s.scorer(out, p.get(AGGREGATION_PARAM)),
                         self.search.epochs, partial(store.offer, study.study), partial(store.drop_losers, study.study))

    def fit_module(self, ctx: JobContext, module: TrialStack, max_epochs: int = -1,
                   callbacks: list[Callback] | None = None) -> None:
        """``Trainer.fit`` of a stack or one trial: the run's device settings, user callbacks, this regime last."""
        callbacks = ctx.callbacks if callbacks is None else callbacks
        trainer = ctx.make_trainer([*callbacks, self], precision=self.precision(ctx), max_epochs=max_epochs,
                                   limit_val_batches=1.0)
        with frozen_parts_expected(), interrupts_pass_through():
            trainer.fit(module)

    def fit_stack(self, ctx: JobContext, search: StackSearch | None, slots: list[Slot] | None = None) -> None:
        """One ``Trainer.fit`` until every budget is spent (or fixed slot ended); per trial unless callbacks stack."""
        if not stack_aware(ctx.callbacks):  # each trial gets fresh copies: callbacks keep per-fit state (patience)
            return fit_each_trial(search, slots or [], self.eval_batch_size,
                                  lambda module: self.fit_module(ctx, module, module.slot.max_epochs,
                                                                 [copy.deepcopy(c) for c in ctx.callbacks]))
        first = search.first_slots() if search is not None else list(slots or [])
        if not first:
            return
        module = TrialStack(first, eval_batch_size=self.eval_batch_size)
        module.search = search
        try:
            self.fit_module(ctx, module)
            unfinished = len(module.active()) if search is None else search.unfinished()
            if unfinished:  # e.g. a user callback set trainer.should_stop, or a Timer ran out
                raise SearchFailed(f"{ctx.job_id}: Trainer.fit stopped with {unfinished} trial(s) unfinished (a "
                                   "callback set trainer.should_stop?); the search's budget was not spent")
        except BaseException:
            if search is not None:
                search.abandon()
            raise

    def train_fixed(self, s: RepeatSearch, factory: TrialFactory, params: Mapping[str, Any], seed: int,
                    epochs: int) -> dict[str, Any]:
        """Train one network for ``epochs`` epochs on a factory's fit part (refit, or a lost weights file)."""
        if s.study is not None:  # the winner's own head stream
            factory.study = s.study.study
        slot = factory.slot(f"{s.key}/fixed", params, seed, epochs, validate=False)
        self.fit_stack(s.ctx, None, [slot])
        if slot.diverged_at is not None:
            raise DataError(f"{s.key}: retraining the winner for {epochs} epochs diverged (non-finite training "
                            f"loss in epoch {slot.diverged_at}); no usable weights")
        return snapshot(slot.net)

    def score_winner(self, s: RepeatSearch) -> RepeatOutcome:
        """The best complete trial's test predictions (its stored best-epoch weights) and metrics, and the record."""
        assert s.study is not None and s.weights is not None
        best, record = best_trial(s.study.study), study_record(s.study.study)
        s.weights.keep_best(s.study.study, best.number)
        weights: dict[str, Any] | None = s.weights.load(best.number)
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
            "holdout_seed": ctx.seed + 1009 * s.repeat,
            "holdout": {"fit_groups": len(np.unique(view.groups[fit])),
                        "val_groups": len(np.unique(view.groups[val])), "fit_windows": len(fit),
                        "val_windows": len(val)},
            "selection_metric": s.scorer.metric_name, "loss": targets.loss,
            "class_weight": targets.class_weight, "class_weighting": self.class_weighting,
            "refit": self.refit, "engine": factory.details,
            "callbacks": [type(c).__name__ for c in ctx.callbacks], **per_trial_note(ctx.callbacks),
            "winner": {"trial": best.number, "value": best.value, "best_epoch": epochs, "weights": source},
            "optuna": {**record, "storage": redact(s.url), "budget": self.search.n_trials,
                       "parallel_trials": self.search.batch, "max_epochs": self.search.epochs},
        }
        if self.search_seeds != list(PUBLISHED_SEARCH_SEEDS):  # the published record is left as it was
            details = {"repeat": s.repeat, "search_seed": s.search_seed, "search_rng_seed": s.seed, **details}
        return score_outcome(ctx, test, pred, {**params, "epochs": epochs}, aggregation, details)
