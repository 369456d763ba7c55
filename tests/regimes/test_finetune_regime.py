import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from ppgbench_pl.benchmark.job import run_job
from ppgbench_pl.cli import main
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE
from ppgbench_pl.regimes.finetune import HEAD_ONLY_SPACE, FinetuneFactory, FinetuneRegime, is_parameter_free
from ppgbench_pl.regimes.neural import Split, make_targets
from tests.regimes.neural_helpers import OneThread, context, datamodule

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "regime_finetune.yaml"
TINY = {"search": SearchSettings(n_trials=2, n_startup_trials=2, max_epochs=2, parallel_trials=2),
        "search_space": {"batch_size": [16], "head_lr": [1e-3]}}
TASKS = {"synthetic-hr": ("mse", 1), "synthetic-activity": ("ce", 1), "synthetic-stiffness": ("bce", 3)}


@pytest.fixture(autouse=True)
def one_thread():
    with OneThread():
        yield


@pytest.fixture(scope="module")
def dm(tmp_path_factory):
    return datamodule(tmp_path_factory.mktemp("finetune_data"))


def _state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_finetune_per_task(dm, task, tmp_path, monkeypatch):
    encoder = SmallCNNEncoder(embed_dim=8)
    pristine = _state(encoder)
    starts = []
    original = FinetuneFactory.slot

    def recording(self, name, params, seed, epochs, validate):
        slot = original(self, name, params, seed, epochs, validate)
        starts.append((_state(slot.net.encoder), all(p.requires_grad for p in slot.net.encoder.parameters())))
        return slot

    monkeypatch.setattr(FinetuneFactory, "slot", recording)
    ctx = context(dm, encoder, task, tmp_path / "job")
    outcomes = FinetuneRegime(**TINY).run(ctx)
    loss, repeats = TASKS[task]
    assert len(outcomes) == repeats
    for outcome in outcomes:
        details = outcome.details
        assert np.isfinite(outcome.metrics[ctx.task.metric]) and details["loss"] == loss
        assert details["engine"] == {"mode": "end_to_end", "embed_dim": 8, "precision": "32-true",  # no AMP on CPU
                                     "engine": "trial_stack", "reseed_head": False}
        assert len(details["optuna"]["trials"]) == 2 and details["optuna"]["parallel_trials"] == 2
        assert set(FINETUNE_SPACE) <= set(outcome.params) and outcome.params["batchnorm_mode"] in ("train", "freeze_stats")
        if task == "synthetic-stiffness":
            assert details["selection_metric"] == "balanced_accuracy" and "aggregation" in outcome.params
    # every trial (and the test-time model) starts from the pristine encoder, which is never touched
    assert starts and all(trainable and all(torch.equal(s[k], pristine[k]) for k in pristine) for s, trainable in starts)
    assert all(torch.equal(v, pristine[k]) for k, v in _state(encoder).items())


def test_parameter_free_encoder_gets_a_head_only_finetune(dm, tmp_path):
    encoder = PublishedPRVEncoder(n_jobs=1)
    assert is_parameter_free(encoder) and not is_parameter_free(SmallCNNEncoder())
    ctx = context(dm, encoder, "synthetic-activity", tmp_path / "job")
    (outcome,) = FinetuneRegime(**TINY).run(ctx)
    assert outcome.details["engine"]["mode"] == "head_only" and outcome.details["engine"]["standardized"]
    assert set(outcome.params) == {*HEAD_ONLY_SPACE, "epochs"} and "batchnorm_mode" not in outcome.params
    assert outcome.params["head_lr"] == 1e-3 and np.isfinite(outcome.metrics["balanced_accuracy"])


def test_diverging_finetune_fails_the_job(dm, tmp_path):
    ctx = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "job")
    regime = FinetuneRegime(**{**TINY, "search_space": {"batch_size": [16], "head_lr": [1e30]}})
    record, _ = run_job(ctx, regime)
    assert record["status"] == "failed" and "SearchFailed" in record["error"] and "diverged" in record["error"]


def test_amp_only_on_cuda(dm, tmp_path, monkeypatch):
    regime = FinetuneRegime(**TINY)
    ctx = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "job")
    view = ctx.view
    outer, test = ctx.outer()
    targets = make_targets(ctx.task, view.y[outer], view.y[outer], view.groups[outer], "balanced", "test")
    factory = regime.make_factory(ctx, Split(outer, None, test), targets, 42)
    assert factory.details["precision"] == "32-true"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ctx.trainer_kwargs = {"accelerator": "gpu"}
    assert regime.make_factory(ctx, Split(outer, None, test), targets, 42).details["precision"] == "16-mixed"
    regime.amp_dtype = "bfloat16"
    assert regime.precision(ctx) == "bf16-mixed"
    regime.amp = False
    assert regime.make_factory(ctx, Split(outer, None, test), targets, 42).details["precision"] == "32-true"


def test_regime_finetune_config_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.chdir(tmp_path)
    controls = '[{"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder", "init_args": {"n_jobs": 1}}]'
    main(["fit", "--config", str(CONFIG), "--output_dir", "run", "--data.init_args.root", str(tmp_path / "data"),
          "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]", "--data.init_args.tasks", "[synthetic-hr]",
          "--data.init_args.synthetic_subjects", "10", "--data.init_args.synthetic_windows", "4",
          "--controls", controls, "--trainer.accelerator", "cpu", "--progress", "false",
          "--trainer.callbacks.init_args.search.n_trials", "2",
          "--trainer.callbacks.init_args.search.max_epochs", "1",
          "--trainer.callbacks.init_args.search_space", '{"batch_size": [16]}'])
    summary = pd.read_csv(tmp_path / "run" / "summary.csv")
    assert set(summary.regime) == {"finetune"} and {"small_cnn", "prv_published", "constant"} <= set(summary.model)
    records = {r["model"]: r for r in (json.loads(p.read_text()) for p in (tmp_path / "run" / "jobs").glob("*/results.json"))}
    assert all(r["status"] == "ok" for r in records.values())
    assert records["small_cnn"]["results"][0]["engine"]["mode"] == "end_to_end"
    assert records["prv_published"]["results"][0]["engine"]["mode"] == "head_only"


def test_removed_engine_options_are_refused():
    with pytest.raises(TypeError, match="stack_mode"):
        FinetuneRegime(stack_mode="vmap")
