import json
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from ppgbench_pl.benchmark.job import baseline_metrics, run_job
from ppgbench_pl.cli import main
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from ppgbench_pl.hpo.optuna_search import SearchSettings, n_finished, open_storage, storage_url
from ppgbench_pl.hpo.spaces import MLP_SPACE
from ppgbench_pl.metrics.aggregation import candidates, first_per_group
from ppgbench_pl.regimes.mlp import MLPRegime
from tests.regimes.neural_helpers import (
    Killed,
    context,
    datamodule,
    embeddings,
    kill_on_ask,
    one_thread,  # noqa: F401 - the autouse fixture
)

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "regime_mlp.yaml"
TINY_SEARCH = SearchSettings(n_trials=3, n_startup_trials=2, max_epochs=3)
TINY = {"search": TINY_SEARCH}
TASKS = {"synthetic-hr": ("mse", 1), "synthetic-activity": ("ce", 1), "synthetic-stiffness": ("bce", 3)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlp_data")
    dm = datamodule(root)
    encoder = SmallCNNEncoder(embed_dim=16)
    return dm, encoder, embeddings(encoder, dm), root


def _ctx(setup, task, work_dir):
    dm, encoder, emb, _ = setup
    return context(dm, encoder, task, work_dir, emb)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_mlp_probe_per_task(setup, task, tmp_path):
    ctx = _ctx(setup, task, tmp_path / "job")
    outcomes = MLPRegime(**TINY).run(ctx)
    loss, repeats = TASKS[task]
    assert len(outcomes) == repeats
    view = ctx.view
    outer, test = ctx.outer()
    for k, outcome in enumerate(outcomes):
        assert np.isfinite(outcome.metrics[ctx.task.metric]) and len(outcome.predictions["y_true"]) == len(test)
        details, params = outcome.details, outcome.params
        assert details["loss"] == loss and details["holdout_seed"] == 42 + 1009 * k
        trials = details["optuna"]["trials"]
        assert len(trials) == TINY_SEARCH.n_trials and details["optuna"]["budget"] == TINY_SEARCH.n_trials
        for trial in trials:
            assert all(trial["params"][name] in values for name, values in MLP_SPACE.items())
            if trial["state"] == "COMPLETE":
                assert trial["value"] == max(trial["intermediate_values"].values())  # best epoch
                assert 1 <= trial["user_attrs"]["best_epoch"] <= TINY_SEARCH.max_epochs
        complete = [t for t in trials if t["state"] == "COMPLETE"]
        winner = max(complete, key=lambda t: (t["value"], -t["number"]))
        assert details["winner"]["trial"] == winner["number"] and details["winner"]["weights"].startswith("best epoch")
        assert params["epochs"] == winner["user_attrs"]["best_epoch"] and params["lr"] == winner["params"]["lr"]
        assert (ctx.work_dir / f"repeat{k}" / "optuna.db").exists()
        assert [p.name for p in (ctx.work_dir / f"repeat{k}").glob("*.pt")] == [f"trial{winner['number']}.pt"]
        if task == "synthetic-stiffness":
            assert params["aggregation"] == candidates("classification")[winner["params"]["aggregation_idx"]]
            fit, _ = ctx.holdout(k)
            subjects = first_per_group(view.groups[fit], view.y[fit])
            assert details["class_weight"] == [pytest.approx((subjects == 0).sum() / (subjects == 1).sum())]
            assert details["selection_metric"] == "auroc"
        else:
            assert "aggregation" not in params and "aggregation_idx" not in params


def test_every_trial_trains_inside_trainer_fit(setup, tmp_path):
    """The default path: every trial's epochs are Lightning epochs of a Trainer.fit (counted by a callback)."""
    from lightning.pytorch.callbacks import Callback

    class CountEpochs(Callback):
        ppgbench_stack_aware = True  # it walks the stack's slots

        def __init__(self):
            self.per_trial, self.fits = {}, 0

        def on_fit_start(self, trainer, pl_module):
            self.fits += 1

        def on_train_epoch_end(self, trainer, pl_module):
            for name in pl_module.epoch_slots:
                self.per_trial[name] = self.per_trial.get(name, 0) + 1

    counter = CountEpochs()
    ctx = _ctx(setup, "synthetic-stiffness", tmp_path / "job")
    ctx.callbacks = [counter]
    outcomes = MLPRegime(SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=3)).run(ctx)
    assert counter.fits == 1  # the 3 repeats' studies share one stacked fit
    expected = {f"{ctx.job_id}/repeat{r}/{t['number']}": len(t["intermediate_values"])
                for r, o in enumerate(outcomes) for t in o.details["optuna"]["trials"]}
    assert len(expected) == 12 and counter.per_trial == expected
    assert all(o.details["callbacks"] == ["CountEpochs"] for o in outcomes)


def test_a_callback_that_stops_the_fit_early_fails_the_job_instead_of_truncating_the_search(setup, tmp_path):
    from lightning.pytorch.callbacks import Callback

    from ppgbench_pl.hpo.optuna_search import SearchFailed

    class StopAfterOneEpoch(Callback):
        ppgbench_stack_aware = True  # in the stack, stopping the fit stops every trial

        def on_train_epoch_end(self, trainer, pl_module):
            trainer.should_stop = True

    ctx = _ctx(setup, "synthetic-hr", tmp_path / "job")
    ctx.callbacks = [StopAfterOneEpoch()]
    with pytest.raises(SearchFailed, match=r"stopped with 3 trial\(s\) unfinished"):
        MLPRegime(**TINY).run(ctx)
    storage = open_storage(storage_url(None, ctx.work_dir, ctx.job_id, 0))
    assert n_finished(optuna.load_study(study_name=f"{ctx.job_id}-repeat0", storage=storage)) == 0


def test_interrupted_search_resumes(setup, tmp_path, monkeypatch):
    from ppgbench_pl.hpo.stack_search import StackSearch

    ctx = _ctx(setup, "synthetic-activity", tmp_path / "job")
    regime = MLPRegime(SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=2))
    original = StackSearch.ask
    kill_on_ask(monkeypatch, 3)
    with pytest.raises(Killed):
        regime.run(ctx)
    storage = open_storage(storage_url(None, ctx.work_dir, ctx.job_id, 0))
    study = optuna.load_study(study_name=f"{ctx.job_id}-repeat0", storage=storage)
    stored = {t.user_attrs["number"]: (t.params, t.value) for t in study.trials}
    assert n_finished(study) == 2 and len(study.trials) == 2  # running trials never reach the storage
    monkeypatch.setattr(StackSearch, "ask", original)
    (outcome,) = regime.run(ctx)
    trials = outcome.details["optuna"]["trials"]
    assert sum(t["state"] in ("COMPLETE", "PRUNED") for t in trials) == 4 and len(trials) == 4
    assert {t["number"]: (t["params"], t["value"]) for t in trials if t["number"] in stored} == stored


def test_finished_search_reuses_stored_weights_or_retrains_the_winner(setup, tmp_path):
    ctx = _ctx(setup, "synthetic-hr", tmp_path / "job")
    regime = MLPRegime(**TINY, search_space={"dropout": [0.0]})
    (first,) = regime.run(ctx)
    (again,) = regime.run(ctx)  # the study is complete: nothing is trained, the stored weights are tested
    assert again.details["winner"]["weights"].startswith("best epoch") and again.metrics == first.metrics
    for path in (ctx.work_dir / "repeat0").glob("*.pt"):
        path.unlink()
    (rebuilt,) = regime.run(ctx)
    assert rebuilt.details["winner"]["weights"] == "retrained: weights file missing"
    assert rebuilt.params == first.params and rebuilt.metrics["mae"] == pytest.approx(first.metrics["mae"], rel=1e-4)


def test_class_missing_from_holdout_train_part_fails_the_job(setup, tmp_path):
    dm = datamodule(setup[3])  # a fresh view cache: the labels are edited below
    ctx = context(dm, setup[1], "synthetic-activity", tmp_path / "job", setup[2])
    view = ctx.view
    outer, _ = ctx.outer()
    _, val = ctx.holdout(0)
    view.y[view.groups == view.groups[val[0]]] = 7  # a class only the validation groups have
    record, predictions = run_job(ctx, MLPRegime(**TINY))
    assert record["status"] == "failed" and predictions == {}
    assert "DataError" in record["error"] and "[7]" in record["error"] and "missing from the holdout-train" in record["error"]


def test_diverging_search_fails_the_job(setup, tmp_path):
    ctx = _ctx(setup, "synthetic-hr", tmp_path / "job")
    record, _ = run_job(ctx, MLPRegime(**TINY, search_space={"lr": [1e30]}))
    assert record["status"] == "failed"
    assert record["error"].startswith("SearchFailed: no trial of 3 completed (diverged: non-finite")


def test_refit_and_unweighted_deviations(setup, tmp_path):
    ctx = _ctx(setup, "synthetic-activity", tmp_path / "job")
    (outcome,) = MLPRegime(**TINY, refit=True, class_weighting="none").run(ctx)
    assert outcome.details["refit"] and outcome.details["winner"]["weights"] == "refit on outer training"
    assert outcome.details["class_weight"] is None and np.isfinite(outcome.metrics["balanced_accuracy"])
    assert MLPRegime(**TINY).settings()["refit"] is False
    settings = MLPRegime(SearchSettings(storage="postgresql://u:secret@h/db")).settings()
    assert "storage" not in settings["search"] and "secret" not in repr(settings)


def test_prv_features_beat_the_constant_baseline_on_hr(tmp_path_factory, tmp_path):
    dm = datamodule(tmp_path_factory.mktemp("prv_data"), synthetic_windows=20)
    encoder = PublishedPRVEncoder(n_jobs=1)
    ctx = context(dm, encoder, "synthetic-hr", tmp_path / "job", embeddings(encoder, dm))
    regime = MLPRegime(SearchSettings(n_trials=2, n_startup_trials=2, max_epochs=25),
                       search_space={"lr": [1e-2], "batch_size": [16], "dropout": [0.0]})
    (outcome,) = regime.run(ctx)
    assert outcome.metrics["mae"] < 0.5 * baseline_metrics(ctx)["mae"]


def test_standardized_targets_learn_heart_rate_in_a_few_epochs(tmp_path_factory, tmp_path):
    dm = datamodule(tmp_path_factory.mktemp("std_data"), synthetic_windows=20)
    encoder = PublishedPRVEncoder(n_jobs=1)
    ctx = context(dm, encoder, "synthetic-hr", tmp_path / "raw", embeddings(encoder, dm))
    space = {"lr": [1e-3], "batch_size": [16], "dropout": [0.0]}
    (raw,) = MLPRegime(SearchSettings(n_trials=1, n_startup_trials=1, max_epochs=6), search_space=space).run(ctx)
    ctx.work_dir = tmp_path / "standardized"
    (std,) = MLPRegime(SearchSettings(n_trials=1, n_startup_trials=1, max_epochs=6), search_space=space,
                       standardize_targets=True).run(ctx)
    # Raw targets around 80 bpm stay far from a head that starts near 0; z-scored ones are learned at once.
    assert raw.metrics["mae"] > 30.0
    assert std.metrics["mae"] < 0.5 * baseline_metrics(ctx)["mae"]


def test_regime_mlp_config_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.chdir(tmp_path)
    controls = '[{"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder", "init_args": {"n_jobs": 1}}]'
    main(["fit", "--config", str(CONFIG), "--output_dir", "run", "--data.init_args.root", str(tmp_path / "data"),
          "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]",
          "--data.init_args.tasks", "[synthetic-hr,synthetic-stiffness]", "--data.init_args.synthetic_subjects", "10",
          "--data.init_args.synthetic_windows", "4", "--data.init_args.synthetic_seed", "2", "--controls", controls,
          "--trainer.callbacks.init_args.search.n_trials", "2",
          "--trainer.callbacks.init_args.search.max_epochs", "2",
          "--trainer.callbacks.init_args.subject_repeats", "1", "--trainer.accelerator", "cpu", "--progress", "false"])
    summary = pd.read_csv(tmp_path / "run" / "summary.csv")
    assert set(summary.regime) == {"mlp"} and {"small_cnn", "prv_published", "constant"} <= set(summary.model)
    records = [json.loads(p.read_text()) for p in (tmp_path / "run" / "jobs").glob("*/results.json")]
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert {r["backend"] for r in records} == {"lightning-trial-stack"}
    assert all(len(r["results"][0]["optuna"]["trials"]) == 2 for r in records)
