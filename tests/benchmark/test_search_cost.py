"""The cost model's search arithmetic (issue 32 item 2): epochs per trial under Hyperband, a job's studies."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ppgbench_pl.benchmark.cost_model import epochs_distribution, hyperband_epochs, search_trials


def test_epochs_per_trial_count_the_epoch_a_trial_is_checked_at():
    dist = epochs_distribution(48, 25)
    assert sum(dist.values()) == pytest.approx(1.0)
    # Optuna checks a trial at steps 1, 3, 9 (0-based): it has trained 2, 4 or 10 epochs when pruned there
    assert sorted(dist) == [2, 4, 10, 25]
    # measured on the synthetic dataset: 8.1 and 8.5 epochs per trial (the old steady state said 6.1)
    assert 7.5 < hyperband_epochs(25, n_trials=48) < 8.5


def test_a_lone_trial_is_never_pruned_and_early_trials_train_longer():
    # Optuna promotes the best of fewer than reduction_factor trials at a rung: the first trial of a search completes
    assert hyperband_epochs(25, n_trials=1) == 25.0
    means = [hyperband_epochs(25, n_trials=n) for n in (1, 4, 12, 48, 480)]
    assert means == sorted(means, reverse=True)
    assert hyperband_epochs(1, n_trials=48) == 1.0
    # the smoke budget: 4 trials of at most 3 epochs (brackets 0 and 1: checks at step 1, or none)
    assert 2.0 < hyperband_epochs(3, n_trials=4) <= 3.0


def test_a_job_counts_every_study_of_its_holdouts_and_search_seeds():
    mean = hyperband_epochs(25, n_trials=48)
    search = SimpleNamespace(n_trials=48, epochs=25, min_resource=1, reduction_factor=3)
    # the published MLP probe on a subject-level task: 3 holdouts, here with 2 search seeds
    regime = SimpleNamespace(search=search, subject_repeats=3, search_seeds=[0, 1])
    subject, window = SimpleNamespace(level="subject"), SimpleNamespace(level="window")
    trials, trial_epochs = search_trials(regime, subject)
    assert trials == 48 * 3 * 2 and trial_epochs == pytest.approx(trials * mean)
    assert search_trials(regime, window)[0] == 48 * 2


def test_the_thread_policy_and_slots_follow_the_executor(monkeypatch):
    import torch

    from ppgbench_pl.benchmark.estimate import executor_shape
    from ppgbench_pl.benchmark.thread_policy import usable_cores

    monkeypatch.delenv("PPGBENCH_THREADS", raising=False)
    local = {"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor"}
    process = {"class_path": "ppgbench_pl.benchmark.executors.ProcessExecutor", "init_args": {"workers": 2}}
    from ppgbench_pl.benchmark.executors import fork_refusal

    name, slots, policy = executor_shape(local, None)
    forks = fork_refusal() is None and usable_cores() > 1  # one forked job process per core, one thread each
    expected = ("local", usable_cores(), 1, 1) if forks else ("local", 1, torch.get_num_threads(), 1)
    assert (name, slots, policy.for_job(False), policy.for_job(True)) == expected
    name, slots, policy = executor_shape({**local, "init_args": {"workers": 1}}, None)
    assert (name, slots, policy.for_job(False), policy.for_job(True)) == ("local", 1, torch.get_num_threads(), 1)
    name, slots, policy = executor_shape(process, None)
    assert (name, slots, policy.for_job(False)) == ("process", 2, max(1, usable_cores() // 2))
    assert executor_shape({**process, "init_args": {"workers": 2, "threads_per_worker": 3}}, None)[2].for_job(False) == 3
    assert executor_shape(process, 5)[2].for_job(True) == 5  # --threads: every job


def test_the_embedding_size_is_read_from_the_config_or_class_before_it_is_assumed():
    from ppgbench_pl.benchmark.cost_model import CostModel, declared_dim, embed_dim

    model = CostModel("test")
    assert declared_dim({"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}) == (
        64, "embed_dim default of SmallCNNEncoder")
    custom = {"class_path": "ppgbench_pl.encoders.custom.CustomEncoder",
              "init_args": {"module": {"class_path": "torch.nn.Linear", "init_args": {"in_features": 640,
                                                                                   "out_features": 32}}}}
    assert embed_dim(custom, model) == (32, "config")
    custom["init_args"]["module"]["init_args"] = {}
    assert embed_dim(custom, model) == (512, "assumed")  # nothing states it: said as assumed
    custom["init_args"]["embed_dim"] = 96
    assert embed_dim(custom, model) == (96, "config")


def test_a_measured_size_counts_only_for_the_entry_it_was_measured_on():
    from ppgbench_pl.benchmark.cost_model import CostModel, embed_dim, encoder_key

    cnn = {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}
    wide = {**cnn, "init_args": {"embed_dim": 512}}
    model = CostModel("test", encoders={encoder_key(cnn): {"name": "small_cnn", "embed_dim": 64,
                                                           "inference_per_s": 1000.0, "training_per_s": 100.0}})
    assert embed_dim(cnn, model) == (64, "measured")
    assert embed_dim(wide, model) == (512, "config")  # same name, other arguments: not the measured 64
    assert model.throughput(wide, "small_cnn")[2]  # the speed of a same-named encoder still stands in


def test_few_validation_subjects_make_scores_tie_and_trials_train_longer():
    from ppgbench_pl.benchmark.cost_model import TIED_COMPLETE, few_validation_subjects

    subject, window = SimpleNamespace(level="subject"), SimpleNamespace(level="window")
    assert few_validation_subjects(subject, 30, 5)  # 30 x 4/5 x 20 % = 4.8 validation subjects
    assert not few_validation_subjects(subject, 219, 5) and not few_validation_subjects(window, 30, 5)
    regime = SimpleNamespace(search=SimpleNamespace(n_trials=48, epochs=25, min_resource=1, reduction_factor=3),
                             subject_repeats=3)
    trials, tied = search_trials(regime, subject, tied=True)
    assert trials == 144 and tied == pytest.approx(144 * (25 * TIED_COMPLETE + 2 * (1 - TIED_COMPLETE)))
    # measured on synthetic stiffness: 3,183 and 3,157 trial-epochs per job of 144 trials
    assert 3157 / 1.5 < tied < 3183 * 1.5
