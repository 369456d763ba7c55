"""The Optuna budget is one nested ``search`` block shared by the MLP and finetune regimes."""

import numpy as np
import pytest
import torch
from jsonargparse import ArgumentParser

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.regimes.finetune import FinetuneFactory, FinetuneRegime
from ppgbench_pl.regimes.mlp import MLPRegime
from ppgbench_pl.regimes.neural import Targets

YAML = """
regimes:
  - class_path: ppgbench_pl.regimes.mlp.MLPRegime
    init_args:
      search: {n_trials: 12, parallel_trials: 4, storage: "sqlite:///x.db"}
      subject_repeats: 1
  - class_path: ppgbench_pl.regimes.finetune.FinetuneRegime
    init_args:
      search: {n_trials: 8, max_epochs: 3}
      amp_dtype: bfloat16
"""


def test_yaml_search_block_parses_and_fills_regime_defaults():
    parser = ArgumentParser()
    parser.add_argument("--regimes", type=list[MLPRegime | FinetuneRegime])
    mlp, finetune = parser.instantiate_classes(parser.parse_string(YAML)).regimes
    assert isinstance(mlp, MLPRegime) and isinstance(finetune, FinetuneRegime)
    assert (mlp.search.n_trials, mlp.search.parallel_trials, mlp.search.max_epochs) == (12, 4, 25)
    assert mlp.search.storage == "sqlite:///x.db" and mlp.subject_repeats == 1
    assert (finetune.search.n_trials, finetune.search.parallel_trials, finetune.search.max_epochs) == (
        8,
        8,
        3,
    )
    assert finetune.amp_dtype == "bfloat16" and finetune.search.n_startup_trials == 8


def test_settings_carry_every_result_value_but_not_the_storage():
    regime = MLPRegime(SearchSettings(n_trials=5, reduction_factor=2, storage="postgresql://u:secret@h/db"))
    settings = regime.settings()
    assert settings["search"] == {
        "n_trials": 5,
        "n_startup_trials": 8,
        "max_epochs": 25,
        "min_resource": 1,
        "reduction_factor": 2,
        "parallel_trials": 1,
    }
    assert "secret" not in repr(settings) and settings["refit"] is False and "engine" not in settings
    assert (
        MLPRegime(SearchSettings(n_trials=6)).settings() != MLPRegime(SearchSettings(n_trials=5)).settings()
    )
    assert FinetuneRegime().settings()["search"]["parallel_trials"] == 8  # published


def test_bad_budget_is_one_line_config_error():
    with pytest.raises(ConfigError, match="n_trials=0"):
        MLPRegime(SearchSettings(n_trials=0))


def test_published_switch_defaults():
    finetune = FinetuneRegime()
    assert finetune.reseed_head is False and finetune.amp and finetune.amp_dtype == "float16"
    assert MLPRegime().search.parallel_trials == 1 and finetune.search.max_epochs == 15


def test_binary_probability_of_one_half_is_the_positive_class():
    targets = Targets("classification", np.array([3, 7]), "bce", 1)
    pred = targets.predictions(np.array([[0.0], [-1e-9], [2.0]]))
    assert pred.labels.tolist() == [7, 3, 7]  # p >= 0.5 is positive (PROTOCOL.md 4.3)


def test_finetune_head_is_not_reseeded_per_trial_unless_asked():
    params = {"hidden_dim": 16, "head_dropout": 0.0}
    heads = {}
    for reseed in (False, True):
        factory = FinetuneFactory.__new__(FinetuneFactory)
        factory.embed_dim, factory.reseed_head = 8, reseed
        factory.targets = Targets("regression", None, "mse", 1)
        factory.restart_stream(7)
        draws = []
        for state in (0, 1):  # trials 0 and 1
            torch.manual_seed(state)  # what ran before in the job must not matter either way
            draws.append(factory.head(params, 42 + 3 if reseed else None, state).state_dict()["net.1.weight"])
        heads[reseed] = draws
    assert not torch.equal(*heads[False])  # published: a running stream, the next head is another draw
    assert torch.equal(*heads[True])  # reseeded: the trial's seed alone decides
