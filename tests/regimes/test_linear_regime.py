import lightning as L
import numpy as np
import pytest

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.data.splits import OuterSplit
from ppgbench_pl.data.task_data import TaskView
from ppgbench_pl.errors import ConfigError, DataError
from ppgbench_pl.probes.linear import SingleClassError
from ppgbench_pl.regimes.linear import LinearRegime, local_folds
from tests.regimes.neural_helpers import view_context


def _context(task_name, y, embeddings, n_groups=10, per=12):
    groups = np.repeat([f"S{i:02d}" for i in range(n_groups)], per)
    test = np.isin(groups, ["S00", "S01"])
    view = TaskView(get_task(task_name), np.arange(len(groups)), y, groups, sorted(set(groups)))
    split = OuterSplit(np.flatnonzero(~test), np.flatnonzero(test))
    return view_context(f"m1__{task_name}", view, split, embeddings, fold=3)


def _data(seed=0, n=120, d=6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    return x, (x @ rng.normal(size=d) + rng.normal(0, 0.3, n)).astype(np.float32)


def test_linear_job_fits_inside_trainer_fit_on_the_context_folds(monkeypatch):
    """One Trainer.fit (the probe fits once at the end of its epoch) and one Trainer.test per job."""
    from ppgbench_pl.datamodules.fold import FoldDataModule

    calls, served = [], []
    fit, test, setup = L.Trainer.fit, L.Trainer.test, FoldDataModule.setup

    def spy(name, original):
        def wrapped(self, *args, **kwargs):
            calls.append((name, type(args[0]).__name__, [type(c).__name__ for c in self.callbacks]))
            return original(self, *args, **kwargs)
        return wrapped

    def setup_spy(self, stage):
        setup(self, stage)
        served.append(list(self.inner_folds))

    monkeypatch.setattr(L.Trainer, "fit", spy("fit", fit))
    monkeypatch.setattr(L.Trainer, "test", spy("test", test))
    monkeypatch.setattr(FoldDataModule, "setup", setup_spy)
    x, y = _data()
    ctx = _context("synthetic-hr", y, x)
    (outcome,) = LinearRegime().run(ctx)
    assert [c[:2] for c in calls] == [("fit", "ProbeTask"), ("test", "ProbeTask")]
    assert all("LinearRegime" in c[2] for c in calls)  # the regime is a callback of the trainers that run it
    assert outcome.params["alpha"] in (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
    assert outcome.metrics["mae"] < 1.0 and outcome.details["n_train_windows"] == 96
    train, _ = ctx.outer()
    folds = local_folds(ctx, train)
    for (tr, va), (ptr, pva), (dtr, dva) in zip(folds, ctx.inner_folds(train), served[0], strict=True):
        np.testing.assert_array_equal(train[tr], ptr)
        np.testing.assert_array_equal(train[va], pva)
        np.testing.assert_array_equal(tr, dtr)  # the datamodule's folds are the context's
        np.testing.assert_array_equal(va, dva)


def test_non_finite_embeddings_name_model_task_and_fold():
    x, y = _data()
    x[50, 2] = np.nan
    with pytest.raises(DataError) as err:
        LinearRegime().run(_context("synthetic-hr", y, x))
    assert str(err.value).startswith(
        "synthetic-hr seed 42 fold 3: embeddings of m1 contain NaN/inf in 1 of 96 rows"
    )


def test_single_class_inner_part_fails_the_job_unless_switched(monkeypatch):
    x, _ = _data(seed=1)
    y = np.zeros(len(x), dtype=np.int64)
    y[:12] = 1  # S00 (a test subject) ...
    y[24:36] = 1  # ... and S02: every inner part that lacks S02 sees class 0 only
    ctx = _context("synthetic-activity", y, x)
    with pytest.raises(
        SingleClassError, match="^synthetic-activity seed 42 fold 3: inner training part .* single class"
    ):
        LinearRegime().run(ctx)
    (outcome,) = LinearRegime(single_class="constant").run(ctx)
    assert outcome.predictions["y_prob"].shape == (24, 2)
    with pytest.raises(ConfigError, match="single_class"):
        LinearRegime(single_class="ignore")


def test_a_logistic_job_is_scikit_learns_grid_search_on_the_context_folds():
    """The one logistic path: the job's C, CV scores and test probabilities are GridSearchCV's."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ppgbench_pl.probes.linear import LOGISTIC_CS

    rng = np.random.default_rng(5)
    x = rng.normal(size=(120, 8))
    y = np.digitize(x[:, :3] @ rng.normal(size=3) + rng.normal(0, 1.5, 120), [-0.7, 0.7]).astype(np.int64)
    ctx = _context("synthetic-activity", y, x)
    (outcome,) = LinearRegime().run(ctx)
    train, test = ctx.outer()
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(solver="lbfgs", max_iter=1000, random_state=42))
    ref = GridSearchCV(pipeline, {"logisticregression__C": list(LOGISTIC_CS)}, scoring="balanced_accuracy",
                       cv=local_folds(ctx, train)).fit(x[train], y[train])
    assert outcome.params["C"] == ref.best_params_["logisticregression__C"]
    assert [s["mean_score"] for s in outcome.details["cv_scores"]] == pytest.approx(
        list(ref.cv_results_["mean_test_score"]), abs=1e-12)
    np.testing.assert_array_equal(outcome.predictions["y_prob"], ref.predict_proba(x[test]))
