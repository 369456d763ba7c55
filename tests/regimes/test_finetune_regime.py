import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from optuna.trial import TrialState

from ppgbench_pl.benchmark.job import run_job
from ppgbench_pl.cli import main
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE
from ppgbench_pl.hpo.stack_search import StackSearch
from ppgbench_pl.hpo.trial_store import TrialWeights
from ppgbench_pl.regimes import neural
from ppgbench_pl.regimes.finetune import HEAD_ONLY_SPACE, FinetuneFactory, FinetuneRegime, is_parameter_free
from ppgbench_pl.regimes.neural import Split, make_targets
from tests.regimes.neural_helpers import (
    Killed,
    context,
    datamodule,
    kill_on_ask,
    one_thread,  # noqa: F401 - the autouse fixture
)

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "regime_finetune.yaml"
TINY = {"search": SearchSettings(n_trials=2, n_startup_trials=2, max_epochs=2, parallel_trials=2),
        "search_space": {"batch_size": [16], "head_lr": [1e-3]}}
TASKS = {"synthetic-hr": ("mse", 1), "synthetic-activity": ("ce", 1), "synthetic-stiffness": ("bce", 3)}


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


# -- the head stream (decision #22): trial n's head is the stream's (n+1)-th draw, whoever asks -------------
def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _factories(dm, tmp_path, reseed_head=False):
    regime = FinetuneRegime(**TINY, reseed_head=reseed_head)
    ctx = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "job")
    outer, test = ctx.outer()
    targets = make_targets(ctx.task, ctx.view.y[outer], ctx.view.y[outer], ctx.view.groups[outer], "balanced", "t")
    return lambda: regime.make_factory(ctx, Split(outer, None, test), targets, 42)


def test_trial_heads_are_their_own_draws_in_any_factory_and_order(dm, tmp_path):
    make = _factories(dm, tmp_path)
    params = [{**{k: v[0] for k, v in FINETUNE_SPACE.items()}, "hidden_dim": w} for w in (16, 8, 16, 32, 8)]
    search = make()
    heads = [_state(search.head(p, None, n)) for n, p in enumerate(params)]  # the search's sequential draws
    assert not _same(heads[0], make().head(params[2], None, 2).state_dict())  # a running stream, not reseeded
    fresh = make()  # a refit's or a resumed search's new factory, knowing the study's trials
    fresh.trial_params = lambda n: params[n]
    for n in (3, 1, 4, 0, 2, 2):  # out of order, and asked twice
        assert _same(_state(fresh.head(params[n], None, n)), heads[n]), n
    assert _same(_state(search.head(params[1], None, 1)), heads[1])  # a lost winner's retrain, after the search
    slot = make().slot("job/fixed", params[0], 42 + 2, 1, validate=False)  # a slot's seed is r + trial number
    assert slot.net.head.net[1].weight.shape[0] == 16 and not _same(_state(slot.net.head), heads[2])  # widths lost
    fixed = [{**p, "hidden_dim": 16} for p in params]  # hidden_dim fixed (published): exact without the study
    reference = make()
    expected = [_state(reference.head(p, None, n)) for n, p in enumerate(fixed)]
    assert _same(_state(make().slot("job/fixed", fixed[3], 42 + 3, 1, validate=False).net.head), expected[3])
    fork = search.for_search(42)  # another search seed's factory: a stream of its own, from its start
    assert _same(_state(fork.head(params[0], None, 0)), heads[0])


def test_reseeded_heads_ignore_the_stream(dm, tmp_path):
    factory = _factories(dm, tmp_path, reseed_head=True)()
    p = {k: v[0] for k, v in FINETUNE_SPACE.items()}
    first = _state(factory.slot("job/3", p, 42 + 3, 1, validate=False).net.head)
    factory.head(p, None, 5)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42 + 3)
        seeded = _state(MLPHead(8, 1, p["hidden_dim"], p["head_dropout"]))
    assert _same(first, seeded) and _same(_state(factory.slot("job/3", p, 45, 1, validate=False).net.head), seeded)


def _record_heads(monkeypatch):
    heads: dict[str, list[dict[str, torch.Tensor]]] = {}
    original = FinetuneFactory.slot

    def recording(self, name, params, seed, epochs, validate):
        slot = original(self, name, params, seed, epochs, validate)
        heads.setdefault(name, []).append(_state(slot.net.head))
        return slot

    monkeypatch.setattr(FinetuneFactory, "slot", recording)
    return heads


def _last_complete(study):  # a winner other than trial 0, whose head a restarted stream gave every retrain
    return max(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number)


def test_retrained_and_refit_winners_start_from_their_own_heads(dm, tmp_path, monkeypatch):
    heads = _record_heads(monkeypatch)
    monkeypatch.setattr(neural, "best_trial", _last_complete)
    monkeypatch.setattr(TrialWeights, "load", lambda self, number: None)  # the winner's weights file is lost
    search = SearchSettings(n_trials=3, n_startup_trials=3, max_epochs=1, parallel_trials=3)
    ctx = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "job")
    key = f"{ctx.job_id}/repeat0"
    sources = []
    for regime in (FinetuneRegime(search, search_space=TINY["search_space"]),  # search, then retrain
                   FinetuneRegime(search, search_space=TINY["search_space"]),  # a finished study: retrain only
                   FinetuneRegime(search, search_space=TINY["search_space"], refit=True)):  # refit's factory
        (outcome,) = regime.run(ctx)
        sources.append(outcome.details["winner"]["weights"])
        winner = outcome.details["winner"]["trial"]
    assert sources == ["retrained: weights file missing"] * 2 + ["refit on outer training"]
    assert winner > 0 and [len(heads[f"{key}/{n}"]) for n in range(3)] == [1, 1, 1]
    assert len(heads[f"{key}/fixed"]) == 3 and all(_same(h, heads[f"{key}/{winner}"][0]) for h in heads[f"{key}/fixed"])


def test_resumed_search_gives_each_trial_its_own_head(dm, tmp_path, monkeypatch):
    heads = _record_heads(monkeypatch)
    regime = FinetuneRegime(SearchSettings(n_trials=4, n_startup_trials=4, max_epochs=1, parallel_trials=2),
                            search_space=TINY["search_space"])
    whole = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "whole")
    regime.run(whole)
    killed = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "killed")
    original = StackSearch.ask
    kill_on_ask(monkeypatch, 2)  # a kill between the first batch and the second
    with pytest.raises(Killed):
        regime.run(killed)
    monkeypatch.setattr(StackSearch, "ask", original)
    regime.run(killed)  # a new factory: its stream replays trials 0 and 1 before drawing trial 2's head
    for n in range(4):
        (a,), (b,) = heads[f"{whole.job_id}/repeat0/{n}"], heads[f"{killed.job_id}/repeat0/{n}"]
        assert _same(a, b), n
