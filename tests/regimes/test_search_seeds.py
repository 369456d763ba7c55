"""search_seeds (issue 19 item 4): extra searches on the same split, recorded per job; the default is unchanged."""

from __future__ import annotations

import json

import pytest

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.finetune import FinetuneRegime
from ppgbench_pl.regimes.mlp import MLPRegime
from ppgbench_pl.regimes.search_seeds import (
    SEARCH_SEED_STRIDE,
    check_search_seeds,
    describe_search_seeds,
    seed_search,
)
from tests.benchmark.helpers import cli, record_files, run, suite_config, write_config


def _mlp(search_seeds: list[int] | None) -> dict:
    args = {"subject_repeats": 2, "search": {"n_trials": 2, "n_startup_trials": 2, "max_epochs": 2},
            "search_space": {"batch_size": [16, 32], "dropout": [0.0, 0.3]}}
    if search_seeds is not None:
        args["search_seeds"] = search_seeds
    return {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime", "init_args": args}


def _records(folder):
    """Records by job id, the run folder's path replaced and trial durations left out."""
    out = {}
    for path in record_files(folder):
        record = json.loads(path.read_text().replace(str(folder), "<run>"))
        for result in record.get("results", []) + record.get("search_seed_results", []):
            for trial in result["optuna"]["trials"]:
                trial.pop("seconds")
        for key in ("seconds", "cpu_seconds", "warnings", "code_version"):
            record.pop(key, None)
        out[path.parent.name] = record
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same tiny MLP suite with the default search and with search_seeds [0, 1]."""
    base = tmp_path_factory.mktemp("search_seeds")
    folders = {}
    for name, seeds in (("default", None), ("seeds", [0, 1])):
        folders[name] = base / name
        config = suite_config(base / "data", folders[name], regimes=[_mlp(seeds)],
                              tasks=["synthetic-stiffness"], folds=[0],
                              data={"synthetic_windows": 4, "synthetic_seed": 2})
        assert run(["--config", str(write_config(base / f"{name}.yaml", config))], "fit") == 0
    return base, folders


def test_the_published_search_is_unchanged_and_the_others_are_recorded_beside_it(runs):
    _, folders = runs
    default, seeded = _records(folders["default"]), _records(folders["seeds"])
    assert default.keys() == seeded.keys() and len(default) == 1
    for jid, rec in default.items():
        assert "search_seed_results" not in rec and all("search_seed" not in r for r in rec["results"])
        other = seeded[jid]
        extra = other.pop("search_seed_results")
        published = [{k: v for k, v in r.items() if k not in ("search_seed", "search_rng_seed")}
                     for r in other.pop("results")]
        assert [r["search_seed"] for r in seeded_results(folders, jid)] == [0] * len(published)
        assert published == rec.pop("results")  # the same numbers, trials, winners and predictions
        assert {k: v for k, v in other.items() if k != "stack_group"} == \
            {k: v for k, v in rec.items() if k != "stack_group"}
        assert [(e["repeat"], e["search_seed"]) for e in extra] == [(r["repeat"], 1) for r in published]
        for entry, base in zip(extra, published, strict=True):
            assert entry["holdout_seed"] == base["holdout_seed"] and entry["holdout"] == base["holdout"]
            assert entry["search_rng_seed"] == base["holdout_seed"] + SEARCH_SEED_STRIDE
            assert entry["predictions"] == f"predictions_repeat{entry['repeat']}_search1.npz"
            assert (folders["seeds"] / "jobs" / jid / entry["predictions"]).is_file()
            assert [t["params"] for t in entry["optuna"]["trials"]] != [t["params"] for t in base["optuna"]["trials"]]
    assert (folders["default"] / "summary.csv").read_text() == (folders["seeds"] / "summary.csv").read_text()


def seeded_results(folders, jid):
    return json.loads((folders["seeds"] / "jobs" / jid / "results.json").read_text())["results"]


def test_search_seeds_are_part_of_the_run_identity(runs, capsys):
    base, folders = runs
    config = suite_config(base / "data", folders["default"], regimes=[_mlp([0, 1, 2])],
                          tasks=["synthetic-stiffness"], folds=[0],
                          data={"synthetic_windows": 4, "synthetic_seed": 2})
    path = write_config(base / "other.yaml", config)
    assert run(["--config", str(path)], "fit") != 0
    assert "search_seeds" in capsys.readouterr().err
    assert cli(["fit", "--config", str(path), "--output_dir", str(base / "fresh"), "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert "search seeds" in out and "mlp [0, 1, 2]: 3 searches per job" in out and "3x a published job" in out


def test_default_identity_and_settings():
    assert "search_seeds" not in MLPRegime().settings()  # folders made before the option resume
    assert MLPRegime(search_seeds=[2, 0]).settings()["search_seeds"] == [0, 2]
    assert FinetuneRegime(search_seeds=[0, 1]).search_seeds == [0, 1]
    assert describe_search_seeds([MLPRegime()], {"mlp": 4}) is None


@pytest.mark.parametrize("value, words", [([1, 2], "must include 0"), ([0, 0], "listed twice"),
                                          ([0, -1], "whole number >= 0"), ("0,1", "expected a list"),
                                          ([0, 1.5], "whole number"), ([], "whole number")])
def test_bad_search_seeds_are_one_line(value, words):
    with pytest.raises(ConfigError, match=words) as err:
        check_search_seeds(value)
    assert "\n" not in str(err.value) and "search_seeds=" in str(err.value)


def test_a_finetune_search_seed_keeps_the_split_and_moves_every_random_stream(tmp_path):
    """Search seed 1 of finetuning: the same holdout and targets, another TPE seed and head stream."""
    import numpy as np
    import torch

    from ppgbench_pl.encoders.cnn import SmallCNNEncoder
    from tests.regimes.neural_helpers import context, datamodule

    ctx = context(datamodule(tmp_path / "data"), SmallCNNEncoder(embed_dim=8), "synthetic-stiffness",
                  tmp_path / "job")
    regime = FinetuneRegime(search_seeds=[0, 1])
    base = regime.repeat_search(ctx, 1)
    other = seed_search(base, 1, regime.make_factory)  # how run_group makes it: the rows shared
    assert other.factory.pristine is base.factory.pristine and other.targets is base.targets
    alone = regime.repeat_search(ctx, 1, 1)  # the same search built from scratch
    assert alone.seed == other.seed and torch.equal(alone.factory.head_stream, other.factory.head_stream)
    assert np.array_equal(base.split.fit, other.split.fit) and np.array_equal(base.split.val, other.split.val)
    assert base.seed == 42 + 1009 and other.seed == 42 + 1009 + SEARCH_SEED_STRIDE
    assert (base.key, other.key) == (f"{ctx.job_id}/repeat1", f"{ctx.job_id}/repeat1/search1")
    assert (base.folder, other.folder) == ("repeat1", "repeat1_search1")
    assert not torch.equal(base.factory.head_stream, other.factory.head_stream)
    from ppgbench_pl.hpo.optuna_search import close_storage

    plans = [regime.open_plan(s) for s in (base, other)]
    assert [p.study.study.study_name for p in plans] == [f"{ctx.job_id}-repeat1", f"{ctx.job_id}-repeat1-search1"]
    assert other.url.endswith("/repeat1_search1/optuna.db") and base.url.endswith("/repeat1/optuna.db")
    asked = [[p.study.ask(p.space)[0].params for _ in range(4)] for p in plans]  # random start-up trials
    assert asked[0] != asked[1]
    for s in (base, other):
        close_storage(s.storage)
