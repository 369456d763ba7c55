"""The cost model's search arithmetic (issue 32 item 2): epochs per trial under Hyperband, a stack group's work."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ppgbench_pl.benchmark.cost_sizes import (
    epochs_distribution,
    hyperband_epochs,
    regime_search_work,
    search_work,
    stack_groups,
)


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


def test_a_stack_group_counts_every_study_of_every_job():
    mean = hyperband_epochs(25, n_trials=48)
    # the published MLP probe on a subject-level task, the two folds of a seed in one stack: 2 jobs x 3 holdouts
    work = search_work(48, 25, 1, 3, studies_per_job=3, jobs=2)
    assert (work.jobs, work.studies, work.trials) == (2, 6, 288)
    assert work.trial_epochs == pytest.approx(288 * mean)


def test_the_regime_settings_give_the_holdout_and_search_repeats():
    search = SimpleNamespace(n_trials=4, epochs=3, min_resource=1, reduction_factor=3)
    regime = SimpleNamespace(search=search, subject_repeats=3, search_seeds=[0, 1])
    subject, window = SimpleNamespace(level="subject"), SimpleNamespace(level="window")
    assert regime_search_work(regime, subject, 5).studies == 5 * 3 * 2
    assert regime_search_work(regime, window, 5).studies == 5 * 2


def test_jobs_are_grouped_into_stacks_as_the_runner_groups_them():
    def job(jid: str, task: str, stack: int, regime: str = "mlp") -> SimpleNamespace:
        return SimpleNamespace(job_id=jid, model_name="m", task=SimpleNamespace(name=task),
                               regime=SimpleNamespace(name=regime, stack_jobs=stack))

    jobs = [job("a0", "hr", 5), job("a1", "hr", 5), job("b0", "age", 5), job("a2", "hr", 5), job("l0", "hr", 1, "lin"),
            job("l1", "hr", 1, "lin")]
    assert stack_groups(jobs) == {"a0": 3, "a1": 3, "a2": 3, "b0": 1, "l0": 1, "l1": 1}
    assert stack_groups([job(f"x{i}", "hr", 2) for i in range(5)]) == {"x0": 2, "x1": 2, "x2": 2, "x3": 2, "x4": 1}


def test_jobs_threads_follow_the_executor_and_omp_num_threads(monkeypatch):
    import os

    from ppgbench_pl.benchmark.estimate import executor_shape

    def job_threads(entry: dict) -> int:
        return executor_shape(entry)[2]

    local = {"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor"}
    process = {"class_path": "ppgbench_pl.benchmark.executors.ProcessExecutor", "init_args": {"workers": 2}}
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert job_threads(local) == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert job_threads(local) == (os.cpu_count() or 1)
    assert job_threads(process) == max(1, (os.cpu_count() or 1) // 2)
    assert job_threads({**process, "init_args": {"workers": 2, "threads_per_worker": 3}}) == 3


def test_the_embedding_size_is_read_from_the_config_or_class_before_it_is_assumed():
    from ppgbench_pl.benchmark.cost_model import CostModel
    from ppgbench_pl.benchmark.cost_sizes import declared_dim, embed_dim

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


def test_few_validation_subjects_make_scores_tie_and_trials_train_longer():
    from ppgbench_pl.benchmark.cost_sizes import TIED_COMPLETE, few_validation_subjects

    subject, window = SimpleNamespace(level="subject"), SimpleNamespace(level="window")
    assert few_validation_subjects(subject, 30, 5)  # 30 x 4/5 x 20 % = 4.8 validation subjects
    assert not few_validation_subjects(subject, 219, 5) and not few_validation_subjects(window, 30, 5)
    tied = search_work(48, 25, 1, 3, studies_per_job=3, jobs=1, tied=True)
    assert tied.trial_epochs == pytest.approx(144 * (25 * TIED_COMPLETE + 2 * (1 - TIED_COMPLETE)))
    # measured on synthetic stiffness: 3,183 and 3,157 trial-epochs per job of 144 trials
    assert 3157 / 1.5 < tied.trial_epochs < 3183 * 1.5
