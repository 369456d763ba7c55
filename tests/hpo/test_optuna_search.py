import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import torch
from optuna.trial import TrialState

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo.optuna_search import (
    FAILURE_ATTR,
    WORKER_ATTR,
    SearchFailed,
    SearchSettings,
    TrialOutcome,
    best_trial,
    close_storage,
    n_finished,
    open_storage,
    open_study,
    run_search,
    storage_url,
    study_record,
)
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, FINETUNE_SPACE, MLP_SPACE, build_space
from ppgbench_pl.hpo.trial_store import TrialWeights

SPACE = {"lr": [1e-3, 1e-2], "batch_size": [16, 32]}

def _settings(**kwargs) -> SearchSettings:
    """Settings with the MLP probe's defaults filled in (25 epochs, 1 trial at a time)."""
    return SearchSettings(**kwargs).resolved(25, 1)


def _complete(trial):
    value = trial.params["lr"] * 100 + trial.params["batch_size"] / 1000
    trial.report(value / 2, 0)
    trial.report(value, 1)
    return TrialOutcome("complete", value=value, best_epoch=2, epochs_run=2, weights={"w": torch.ones(1)})


def _study(tmp_path: Path, name: str = "s", settings: SearchSettings | None = None):
    storage = open_storage(storage_url(None, tmp_path, "job", 0))
    return open_study(storage, name, settings or _settings(n_trials=5, n_startup_trials=2), seed=42), storage


def test_storage_url_default_and_templates(tmp_path):
    url = storage_url(None, tmp_path, "job", 2)
    assert url == f"sqlite:///{(tmp_path / 'repeat2' / 'optuna.db').resolve()}"
    assert (tmp_path / "repeat2").is_dir()
    assert storage_url("sqlite:///{work_dir}/{job_id}-{repeat}.db", tmp_path, "j1", 1) == f"sqlite:///{tmp_path}/j1-1.db"
    assert storage_url("postgresql://u:p@host/db", tmp_path, "j", 0) == "postgresql://u:p@host/db"


def test_settings_are_the_protocol_ones():
    settings = _settings()
    sampler, pruner = settings.sampler(7), settings.pruner()
    assert (settings.n_trials, settings.max_epochs, settings.parallel_trials) == (48, 25, 1)
    assert sampler._n_startup_trials == 8 and sampler._multivariate and sampler._group and sampler._constant_liar
    assert (pruner._min_resource, pruner._max_resource, pruner._reduction_factor) == (1, 25, 3)


def test_search_reaches_budget_in_batches_and_records_everything(tmp_path):
    settings = _settings(n_trials=5, n_startup_trials=2, parallel_trials=2)
    study, storage = _study(tmp_path, settings=settings)
    sizes = []

    def run_batch(trials):
        sizes.append(len(trials))
        return [_complete(t) for t in trials]

    run_search(study, settings, SPACE, run_batch)
    assert sizes == [2, 2, 1] and n_finished(study) == 5
    record = study_record(study)
    assert record["n_trials"] == 5
    first = record["trials"][0]
    assert first["state"] == "COMPLETE" and set(first["params"]) == set(SPACE)
    assert first["intermediate_values"] == {"0": pytest.approx(first["value"] / 2), "1": first["value"]}
    assert first["user_attrs"]["best_epoch"] == 2 and WORKER_ATTR in first["user_attrs"]
    assert all(t["params"][k] in SPACE[k] for t in record["trials"] for k in SPACE)
    close_storage(storage)


def test_interrupted_search_resumes_to_the_budget(tmp_path):
    settings = _settings(n_trials=5, n_startup_trials=2)
    study, storage = _study(tmp_path, settings=settings)
    calls = []

    def crashing(trials):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return [_complete(t) for t in trials]

    with pytest.raises(KeyboardInterrupt):
        run_search(study, settings, SPACE, crashing)
    before = {t.number: t.params for t in study.get_trials() if t.state == TrialState.COMPLETE}
    assert n_finished(study) == 2 and study.trials[2].state == TrialState.FAIL
    close_storage(storage)

    resumed, storage = _study(tmp_path, settings=settings)  # a new process: load_if_exists
    run_search(resumed, settings, SPACE, lambda trials: [_complete(t) for t in trials])
    trials = resumed.get_trials()
    assert n_finished(resumed) == 5 and len(trials) == 6  # the interrupted trial does not count
    assert {t.number: t.params for t in trials if t.number in before} == before
    close_storage(storage)


def test_failures_count_but_interruptions_and_orphans_do_not(tmp_path):
    settings = _settings(n_trials=3, n_startup_trials=2)
    study, storage = _study(tmp_path, settings=settings)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = study.ask()
    orphan.set_user_attr(WORKER_ATTR, f"{__import__('socket').gethostname()}:{dead.stdout.strip()}")
    outcomes = iter([TrialOutcome("failed", epochs_run=1, failure="diverged: nan"), TrialOutcome("pruned", epochs_run=1)])

    def run_batch(trials):
        return [next(outcomes, None) or _complete(t) for t in trials]

    run_search(study, settings, SPACE, run_batch)
    states = [t.state for t in study.get_trials()]
    assert states == [TrialState.FAIL, TrialState.FAIL, TrialState.PRUNED, TrialState.COMPLETE]
    assert FAILURE_ATTR not in study.trials[0].user_attrs  # the dead worker's trial
    assert study.trials[1].user_attrs[FAILURE_ATTR] == "diverged: nan"
    close_storage(storage)


def test_best_trial_ties_and_search_failed(tmp_path):
    study, storage = _study(tmp_path)
    with pytest.raises(SearchFailed, match="no trial of 0 completed"):
        best_trial(study)
    failed = study.ask()
    failed.set_user_attr(FAILURE_ATTR, "diverged: non-finite training loss at epoch 1")
    study.tell(failed, state=TrialState.FAIL)
    with pytest.raises(SearchFailed, match="diverged: non-finite"):
        best_trial(study)
    for value in (0.5, 0.9, 0.9):
        study.tell(study.ask(), value)
    assert best_trial(study).number == 2
    close_storage(storage)


def test_journal_storage_resumes(tmp_path):
    url = storage_url("journal:{work_dir}/journal/{job_id}-{repeat}.log", tmp_path, "j", 0)
    settings = _settings(n_trials=2, n_startup_trials=1)
    study = open_study(open_storage(url), "j", settings, seed=1)
    run_search(study, settings, SPACE, lambda trials: [_complete(t) for t in trials])
    again = open_study(open_storage(url), "j", _settings(n_trials=3, n_startup_trials=1), seed=1)
    assert n_finished(again) == 2
    assert (tmp_path / "journal" / "j-0.log").exists()


def test_trial_weights_keep_only_the_best(tmp_path):
    study, storage = _study(tmp_path)
    store = TrialWeights(tmp_path / "w")
    assert store.load(0) is None
    for value in (0.5, 0.2, 0.8, 0.8):
        trial = study.ask()
        store.offer(study, trial.number, value, {"w": torch.full((2,), value)})
        study.tell(trial, value)
    assert sorted(p.name for p in (tmp_path / "w").glob("*.pt")) == ["trial2.pt"]
    assert torch.equal(store.load(2)["w"], torch.full((2,), 0.8))
    store.keep_best(study, 2)
    assert store.load(2) is not None
    close_storage(storage)


def test_search_spaces():
    space = build_space(MLP_SPACE, {"lr": [1e-2]}, ("mean", "median", "topk_mean"))
    assert space["lr"] == [1e-2] and space["weight_decay"] == [0.0] and space[AGGREGATION_PARAM] == [0, 1, 2]
    assert AGGREGATION_PARAM not in build_space(MLP_SPACE)
    assert MLP_SPACE["lr"] == [1e-5, 1e-4, 1e-3, 5e-3, 1e-2]  # overrides never touch the protocol space
    assert FINETUNE_SPACE["batch_size"] == [128, 512, 1024, 2048]
    with pytest.raises(ConfigError, match="unknown parameter 'learning_rate'"):
        build_space(MLP_SPACE, {"learning_rate": [1.0]})
    with pytest.raises(ConfigError, match="at least one value"):
        build_space(MLP_SPACE, {"lr": []})


def test_open_study_passes_sampler_and_pruner_again_on_load(tmp_path):
    study, storage = _study(tmp_path)
    study.tell(study.ask(), 1.0)
    close_storage(storage)
    again, storage = _study(tmp_path, settings=_settings(max_epochs=7))
    assert isinstance(again.sampler, optuna.samplers.TPESampler) and again.pruner._max_resource == 7
    assert len(again.trials) == 1
    close_storage(storage)


def test_reports_and_pruning_stay_in_memory_until_the_trial_ends(tmp_path):
    settings = _settings(n_trials=6, n_startup_trials=2, parallel_trials=3, max_epochs=9)
    study, storage = _study(tmp_path, settings=settings)
    stored_during: list[dict] = []

    def run_batch(trials):
        outcomes = []
        for trial in trials:
            pruned = None
            for epoch in range(9):
                trial.report(float(trial.number % 3 + epoch / 10), epoch)
                if trial.should_prune():
                    pruned = epoch
                    break
            # nothing reported has reached the stored study yet
            stored_during.append(storage.get_trial(storage.get_trial_id_from_study_id_trial_number(
                study._study_id, trial.number)).intermediate_values)
            outcomes.append(TrialOutcome("pruned", epochs_run=pruned + 1) if pruned is not None else
                            TrialOutcome("complete", value=trial.number % 3 + 0.8, best_epoch=9, epochs_run=9,
                                         weights={}))
        return outcomes

    run_search(study, settings, SPACE, run_batch)
    assert stored_during == [{}] * 6
    again = optuna.load_study(study_name="s", storage=storage)
    trials = again.get_trials()
    assert n_finished(again) == 6 and any(t.state == TrialState.PRUNED for t in trials)
    for t in trials:  # every report and Hyperband's rung bookkeeping reached the stored trial at its end
        assert len(t.intermediate_values) == t.user_attrs["epochs_run"]
        assert any(k.startswith("completed_rung_") for k in t.system_attrs)


def test_a_finished_trials_reports_reach_the_rdb_in_one_transaction(tmp_path, monkeypatch):
    """The study's storage is Optuna's cache around the RDBStorage; the reports must still take the
    one-transaction path, not one commit per epoch."""
    from optuna.storages import RDBStorage

    settings = _settings(n_trials=2, n_startup_trials=2, parallel_trials=2, max_epochs=5)
    study, storage = _study(tmp_path, settings=settings)
    batched, single = [], []
    original = RDBStorage._set_trial_intermediate_value_without_commit
    monkeypatch.setattr(RDBStorage, "_set_trial_intermediate_value_without_commit",
                        lambda self, *a: (batched.append(a[2]), original(self, *a))[1])
    monkeypatch.setattr(RDBStorage, "set_trial_intermediate_value",
                        lambda self, *a: single.append(a))

    def run_batch(trials):
        for trial in trials:
            for epoch in range(5):
                trial.report(float(epoch), epoch)
        return [TrialOutcome("complete", value=4.0, best_epoch=5, epochs_run=5, weights={}) for _ in trials]

    run_search(study, settings, SPACE, run_batch)
    assert single == [] and batched == [0, 1, 2, 3, 4] * 2
    again = optuna.load_study(study_name="s", storage=storage)
    assert [sorted(t.intermediate_values) for t in again.get_trials()] == [[0, 1, 2, 3, 4]] * 2
