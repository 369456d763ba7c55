"""Linear probe regime (PROTOCOL.md 4.1): a callback of its ProbeTask trainer that fits and predicts there."""

from __future__ import annotations

import lightning as L
import numpy as np

from ppgbench_pl.datamodules.fold import FoldDataModule
from ppgbench_pl.errors import ConfigError, PPGBenchError
from ppgbench_pl.probes.families import LogisticFamily, ProbeFamily, RidgeFamily
from ppgbench_pl.probes.search import GroupGridSearch
from ppgbench_pl.regimes.base import (
    JobContext,
    Regime,
    RepeatOutcome,
    frozen_parts_expected,
    interrupts_pass_through,
    score_outcome,
)
from ppgbench_pl.tasks.probe_task import ProbeTask


def local_folds(ctx: JobContext, train_positions: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The context's inner folds of ``train_positions``, as row indices into that array."""
    local = np.empty(len(ctx.view.y), dtype=np.int64)
    local[train_positions] = np.arange(len(train_positions))
    return [(local[tr], local[va]) for tr, va in ctx.inner_folds(train_positions)]


class ProbeRegime(Regime):
    """A fit-once regime: a probe family searched by inner group CV on cached embeddings.

    Args:
        binary_metric: Selection metric for binary tasks (``auroc`` as published, or ``balanced_accuracy``).
    """

    def __init__(self, binary_metric: str = "auroc") -> None:
        self.binary_metric = binary_metric

    def family(self, ctx: JobContext) -> ProbeFamily:
        """The model family and grid for this task."""
        raise NotImplementedError

    def fit_and_score(self, ctx: JobContext, train_positions: np.ndarray) -> RepeatOutcome:
        """Search on the given outer-training positions, refit, and score the outer test fold (errors name the job)."""
        view = ctx.view
        _, test = ctx.outer()
        where = f"{ctx.task.name} seed {ctx.seed} fold {ctx.fold}"
        try:
            search = GroupGridSearch(self.family(ctx), ctx.task.kind, ctx.task.level, ctx.seed,
                                     ctx.n_inner_folds, self.binary_metric,
                                     what=f"embeddings of {ctx.model_name}")
            groups = view.groups[train_positions]
            data = FoldDataModule(ctx.features(train_positions), view.y[train_positions], groups,
                                  ctx.features(test), ctx.seed, ctx.n_inner_folds)
            module = ProbeTask(search, groups=groups)
            overrides = {**ProbeTask.trainer_arguments, "precision": "32-true", "enable_progress_bar": False}
            with frozen_parts_expected(), interrupts_pass_through():
                trainer = ctx.make_trainer([self], **overrides)
                trainer.fit(module, datamodule=data)
                trainer.test(module, datamodule=data, verbose=False)
            assert module.predictions is not None
            details = {"cv_scores": search.cv_scores_, "best_score": search.best_score_,
                       "n_train_windows": len(train_positions)}
            return score_outcome(ctx, test, module.predictions, search.best_params_, search.aggregation_, details)
        except PPGBenchError as exc:
            raise type(exc)(f"{where}: {exc}") from exc

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """One repeat on the whole outer-training part."""
        train, _ = ctx.outer()
        return [self.fit_and_score(ctx, train)]

    # -- Lightning hooks of the probe's trainer (the ProbeTask only gathers rows) ------------------------------
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Fit the estimator once on the gathered rows, on the datamodule's inner folds when it has them."""
        if not isinstance(pl_module, ProbeTask) or bool(pl_module.fitted):
            return
        z, y, index = (np.concatenate([rows[k] for rows in pl_module.train_rows]) for k in range(3))
        groups = pl_module.groups[index] if pl_module.groups is not None else index
        folds = getattr(getattr(trainer, "datamodule", None), "inner_folds", None) or None  # FoldDataModule's
        if folds is not None and not np.array_equal(index, np.arange(len(index))):
            raise RuntimeError("ProbeTask: inner folds need the training rows in their original order")
        pl_module.fit_arrays(z.astype(np.float64), y, groups, folds=folds)
        pl_module.train_rows.clear()

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Predict all gathered test rows with the fitted estimator (``RuntimeError`` before fit)."""
        if isinstance(pl_module, ProbeTask):
            pl_module.predict_arrays(np.concatenate(pl_module.test_rows).astype(np.float64))
            pl_module.test_rows.clear()


class LinearRegime(ProbeRegime):
    """Ridge (regression, multi-output) or logistic regression (classification) with the protocol grids.

    The logistic probe is scikit-learn's ``StandardScaler -> LogisticRegression(lbfgs, max_iter 1000)`` at
    its default tolerance, one fit per C and inner fold, as published.

    Args:
        binary_metric: Selection metric for binary tasks (``auroc`` as published).
        single_class: A logistic training part (inner or outer) with one class: ``error`` (published, as
            scikit-learn raises: the job fails with that reason) or ``constant`` (that part predicts its
            class with certainty).
    """

    name = "linear"

    def __init__(self, binary_metric: str = "auroc", single_class: str = "error") -> None:
        super().__init__(binary_metric)
        if single_class not in ("error", "constant"):
            raise ConfigError(f"linear regime: single_class must be 'error' or 'constant', "
                              f"got {single_class!r}")
        self.single_class = single_class

    def family(self, ctx: JobContext) -> ProbeFamily:
        """Ridge for regression kinds, logistic regression for classification."""
        if ctx.task.kind == "classification":
            return LogisticFamily(single_class=self.single_class)
        return RidgeFamily()

    def backend(self) -> str:
        """``sklearn``, recorded in every job: the logistic probes are scikit-learn's own fits."""
        return "sklearn"
