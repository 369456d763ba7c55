"""Linear probe regime: ridge / L2 logistic regression on frozen embeddings (PROTOCOL.md 4.1).

Hyperparameters (and the subject aggregation for subject-level tasks) are chosen by full inner 4-fold
group CV on the outer-training part, the winner is refitted on the whole outer-training part and scored
on the outer test fold. The fit runs inside :class:`~ppgbench_pl.tasks.ProbeTask`, the no-optimiser
LightningModule.
"""

from __future__ import annotations

from typing import Any

from ppgbench_pl.probes.families import LogisticFamily, ProbeFamily, RidgeFamily
from ppgbench_pl.probes.search import GroupGridSearch
from ppgbench_pl.regimes.base import JobContext, Regime, RepeatOutcome, score_outcome
from ppgbench_pl.tasks.probe_task import ProbeTask


class ProbeRegime(Regime):
    """A fit-once regime: a probe family searched by inner group CV on cached embeddings.

    Args:
        binary_metric: Selection metric for binary tasks (``auroc`` as published, or ``balanced_accuracy``).
    """

    uses_embeddings = True

    def __init__(self, binary_metric: str = "auroc") -> None:
        self.binary_metric = binary_metric

    def family(self, ctx: JobContext) -> ProbeFamily:
        """The model family and grid for this task."""
        raise NotImplementedError

    def fit_and_score(self, ctx: JobContext, train_positions: Any) -> RepeatOutcome:
        """Search on the given outer-training positions, refit, and score the outer test fold."""
        view = ctx.view()
        _, test = ctx.outer()
        search = GroupGridSearch(self.family(ctx), ctx.task.kind, ctx.task.level, ctx.seed,
                                 ctx.datamodule.n_inner_folds, self.binary_metric)
        module = ProbeTask(search, groups=view.groups)
        dm = ctx.datamodule
        dm.select(ctx.fs, ctx.task, ctx.seed, ctx.fold, embeddings=ctx.embeddings, train_positions=train_positions)
        trainer = ctx.make_trainer([self], **ProbeTask.trainer_arguments)
        trainer.fit(module, datamodule=dm)
        trainer.test(module, datamodule=dm, verbose=False)
        assert module.predictions is not None
        details = {"cv_scores": search.cv_scores_, "best_score": search.best_score_, "n_train_windows": len(train_positions)}
        return score_outcome(ctx, test, module.predictions, search.best_params_, search.aggregation_, details)

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """One repeat on the whole outer-training part."""
        train, _ = ctx.outer()
        return [self.fit_and_score(ctx, train)]


class LinearRegime(ProbeRegime):
    """Ridge (regression, multi-output) or logistic regression (classification) with the protocol grids."""

    name = "linear"

    def family(self, ctx: JobContext) -> ProbeFamily:
        """Ridge for regression kinds, logistic regression for classification."""
        return LogisticFamily() if ctx.task.kind == "classification" else RidgeFamily()

    def backend(self) -> str:
        """Always scikit-learn/NumPy on the CPU."""
        return "sklearn"
