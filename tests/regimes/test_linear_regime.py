import lightning as L
import numpy as np
import pytest

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.data.splits import OuterSplit
from ppgbench_pl.data.task_data import TaskView
from ppgbench_pl.errors import ConfigError, DataError
from ppgbench_pl.probes.linear import SingleClassError
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.linear import LinearRegime, local_folds


class _Encoder:
    name = "m1"
    sampling_rate = 64.0


def _context(task_name, y, embeddings, n_groups=10, per=12):
    groups = np.repeat([f"S{i:02d}" for i in range(n_groups)], per)
    test = np.isin(groups, ["S00", "S01"])
    view = TaskView(get_task(task_name), np.arange(len(groups)), y, groups, sorted(set(groups)))
    split = OuterSplit(np.flatnonzero(~test), np.flatnonzero(test))
    return JobContext(
        f"m1__{task_name}",
        "m1",
        _Encoder(),
        get_task(task_name),
        42,
        3,
        view,
        split,
        work_dir=None,
        embeddings=embeddings,
    )


def _data(seed=0, n=120, d=6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    return x, (x @ rng.normal(size=d) + rng.normal(0, 0.3, n)).astype(np.float32)


def test_linear_job_runs_without_a_trainer_on_the_context_folds(monkeypatch):
    def no_trainer(*args, **kwargs):
        raise AssertionError("a linear job must not build a Lightning Trainer")

    monkeypatch.setattr(L, "Trainer", no_trainer)
    x, y = _data()
    ctx = _context("synthetic-hr", y, x)
    (outcome,) = LinearRegime().run(ctx)
    assert outcome.params["alpha"] in (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
    assert outcome.metrics["mae"] < 1.0 and outcome.details["n_train_windows"] == 96
    train, _ = ctx.outer()
    folds = local_folds(ctx, train)
    for (tr, va), (ptr, pva) in zip(folds, ctx.inner_folds(train), strict=True):
        np.testing.assert_array_equal(train[tr], ptr)
        np.testing.assert_array_equal(train[va], pva)


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


def test_batched_logistic_solver_gives_the_published_solvers_job():
    """``logistic_solver: batched`` replays scikit-learn's lbfgs: same C, same probabilities, own backend."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(120, 8))
    y = np.digitize(x[:, :3] @ rng.normal(size=3) + rng.normal(0, 1.5, 120), [-0.7, 0.7]).astype(np.int64)
    ctx = _context("synthetic-activity", y, x)
    published, batched = LinearRegime(), LinearRegime(logistic_solver="batched")
    (ref,) = published.run(ctx)
    (ours,) = batched.run(ctx)
    assert ours.params == ref.params
    assert [s["mean_score"] for s in ours.details["cv_scores"]] == pytest.approx(
        [s["mean_score"] for s in ref.details["cv_scores"]], abs=1e-12)
    np.testing.assert_allclose(ours.predictions["y_prob"], ref.predictions["y_prob"], atol=1e-8)
    assert (published.backend(), batched.backend()) == ("sklearn", "sklearn+torch-lbfgs-replay")


def test_the_optimum_solver_stays_reachable_and_is_labelled_apart():
    """``batched-optimum`` reaches the optimum solver through the config, its backend says so, and an
    unknown solver is one line."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(120, 8))
    y = (x[:, 0] + rng.normal(0, 1.0, 120) > 0).astype(np.int64)
    ctx = _context("synthetic-stiffness", y, x)
    optimum = LinearRegime(logistic_solver="batched-optimum")
    assert optimum.family(ctx).method == "optimum"
    assert LinearRegime(logistic_solver="batched").family(ctx).method == "sklearn"
    (result,) = optimum.run(ctx)
    assert result.params and np.isfinite(result.predictions["y_prob"]).all()
    assert optimum.backend() == "sklearn+torch-lbfgs-optimum"
    with pytest.raises(ConfigError, match="batched-optimum"):
        LinearRegime(logistic_solver="newton")
