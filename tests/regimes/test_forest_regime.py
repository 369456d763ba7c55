import numpy as np
import pytest
import torch

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.metrics.aggregation import candidates
from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.metrics.scores import NotEvaluableError
from ppgbench_pl.probes import backends
from ppgbench_pl.probes.constant import constant_predictions
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.forest import RandomForestRegime

TASKS = ["synthetic-hr", "synthetic-activity", "synthetic-stiffness"]


def contexts(tmp, tasks, folds, **dm_args):
    """JobContexts (seed 42) of the published PRV control with its embeddings of every window."""
    dm = PPGDataModule(
        dataset="synthetic", root=str(tmp / "data"), tasks=tasks, seeds=[42], folds=list(folds), **dm_args
    )
    encoder = PublishedPRVEncoder(n_jobs=1)
    windows = dm.windows(float(encoder.sampling_rate))
    with torch.no_grad():
        embeddings = encoder(torch.from_numpy(windows.x)).numpy()
    return {
        (task, fold): JobContext.build(
            dm,
            encoder,
            get_task(task),
            42,
            fold,
            tmp / f"{task}_{fold}",
            embeddings=embeddings,
            raw_windows=False,
        )
        for task in tasks
        for fold in folds
    }


REGIME = {"backend": "sklearn", "n_jobs": 1, "n_estimators": [15], "max_depth": [2, 6]}


@pytest.fixture(scope="module")
def all_contexts(tmp_path_factory):
    # fold 1's three test subjects of synthetic-stiffness are all class 0; folds 0 and 3 hold both classes
    return contexts(
        tmp_path_factory.mktemp("rf"), TASKS, (0, 1, 3), synthetic_subjects=12, synthetic_windows=8
    )


@pytest.fixture(scope="module")
def outcomes(all_contexts):
    """One RF run (seed 42, folds 0 and 3) of the published PRV control on three synthetic tasks."""
    regime = RandomForestRegime(**REGIME)
    return {key: (ctx, regime.run(ctx)) for key, ctx in all_contexts.items() if key[1] != 1}


def test_single_class_test_fold_is_not_evaluable(all_contexts):
    with pytest.raises(NotEvaluableError) as err:
        RandomForestRegime(**REGIME).run(all_contexts[("synthetic-stiffness", 1)])
    assert str(err.value).startswith(
        "synthetic-stiffness seed 42 fold 1: balanced accuracy is not evaluable: every test label is class 0"
    )


def _results(outcomes, task):
    return [(ctx, runs[0]) for (t, _), (ctx, runs) in outcomes.items() if t == task]


def test_outcomes_carry_backend_and_grid_choice(outcomes):
    for task in TASKS:
        for _, outcome in _results(outcomes, task):
            assert outcome.details["forest_backend"] == "sklearn"
            assert outcome.params["n_estimators"] == 15 and outcome.params["max_depth"] in (2, 6)
            assert len(outcome.details["cv_scores"]) == 2 * (3 if task == "synthetic-stiffness" else 1)


def test_regression_beats_constant_baseline(outcomes):
    for ctx, outcome in _results(outcomes, "synthetic-hr"):
        train, test = ctx.outer()
        view = ctx.view
        const = constant_predictions("regression", "window", view.y[train], view.groups[train], len(test))
        baseline = evaluate("regression", "window", view.y[test], view.groups[test], const, None)["mae"]
        assert outcome.metrics["mae"] < 0.6 * baseline


def test_multiclass_predictions(outcomes):
    for _, outcome in _results(outcomes, "synthetic-activity"):
        arrays = outcome.predictions
        assert arrays["y_prob"].shape == (len(arrays["y_true"]), len(arrays["classes"]))
        np.testing.assert_allclose(arrays["y_prob"].sum(axis=1), 1.0)
        assert outcome.metrics["balanced_accuracy"] is not None


def test_subject_level_binary_records_aggregation(outcomes):
    for ctx, outcome in _results(outcomes, "synthetic-stiffness"):
        _, test = ctx.outer()
        assert outcome.params["aggregation"] in candidates("classification")
        assert outcome.metrics["n_subjects"] == len(set(ctx.view.groups[test].tolist()))


def test_settings_identity_and_config_errors(monkeypatch):
    regime = RandomForestRegime(backend="sklearn", n_jobs=4, max_depth=[3])
    settings = regime.settings()
    assert "n_jobs" not in settings and settings["resolved_backend"] == "sklearn"
    assert settings["max_depth"] == (3,) and regime.backend() == "sklearn" and regime.name == "rf"
    monkeypatch.setattr(backends, "cuml_usable", lambda: False)
    assert RandomForestRegime().backend() == "sklearn"  # auto falls back, and says which backend ran
    with pytest.raises(ConfigError, match="cuml") as err:
        RandomForestRegime(backend="cuml")
    assert "\n" not in str(err.value)
    monkeypatch.setattr(backends, "cuml_usable", lambda: True)
    assert RandomForestRegime().backend() == "cuml" and RandomForestRegime(backend="cuml").backend() == "cuml"
    with pytest.raises(ConfigError, match="max_depth"):
        RandomForestRegime(backend="sklearn", max_depth=[])


def test_a_cuml_run_labels_the_multi_output_task_sklearn(monkeypatch):
    """cuML forests take one target, so ECSMP's six-output task is fitted by scikit-learn: its record (and so
    summary.csv and W&B) says sklearn, not the resolved cuml."""
    from types import SimpleNamespace

    from ppgbench_pl.benchmark.job import _record_head
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder

    monkeypatch.setattr(backends, "cuml_usable", lambda: True)
    regime = RandomForestRegime(backend="cuml")
    assert regime.backend_for("regression_cls") == "sklearn" and regime.backend_for("regression") == "cuml"
    task = SimpleNamespace(name="ecsmp-emotion", metric="mae", kind="regression_cls", level="subject")
    ctx = SimpleNamespace(job_id="j", model_name="m", task=task, seed=42, fold=0, fs=64.0, callbacks=[],
                          encoder=SmallCNNEncoder(embed_dim=8))
    assert _record_head(ctx, regime)["backend"] == "sklearn"  # type: ignore[arg-type]
