"""PersistentStudy: an in-memory Optuna search whose finished trials are copied, one write each, to durable storage."""

from pathlib import Path

import optuna
import pytest
import torch
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo.optuna_search import (
    FAILURE_ATTR,
    NUMBER_ATTR,
    PersistentStudy,
    SearchFailed,
    SearchSettings,
    TrialOutcome,
    best_trial,
    close_storage,
    counts_toward_budget,
    n_finished,
    open_storage,
    storage_url,
    study_record,
)
from ppgbench_pl.hpo.spaces import AGGREGATION_PARAM, FINETUNE_SPACE, MLP_SPACE, build_space
from ppgbench_pl.hpo.trial_store import TrialWeights

SPACE = {"lr": [1e-3, 1e-2], "batch_size": [16, 32]}


def _settings(**kwargs) -> SearchSettings:
    """Settings with the MLP probe's defaults filled in (25 epochs, 1 trial at a time)."""
    return SearchSettings(**kwargs).resolved(25, 1)


class Durable:
    """One job's durable storage (an SQLite file in its work folder), opened and closed like a process would."""

    def __init__(self, tmp_path: Path, name: str = "job-repeat0") -> None:
        self.url, self.name, self.opened = storage_url(None, tmp_path, "job", 0), name, []

    def open(self, settings: SearchSettings, seed: int = 42) -> PersistentStudy:
        storage = open_storage(self.url)
        self.opened.append(storage)
        return PersistentStudy(storage, self.name, settings, seed=seed)

    def stored(self) -> list[optuna.trial.FrozenTrial]:
        """The durable trials, read back through a fresh connection."""
        storage = open_storage(self.url)
        try:
            return optuna.load_study(study_name=self.name, storage=storage).get_trials(deepcopy=True)
        finally:
            close_storage(storage)

    def close(self) -> None:
        for storage in self.opened:
            close_storage(storage)
        self.opened.clear()


@pytest.fixture
def durable(tmp_path):
    store = Durable(tmp_path)
    yield store
    store.close()


def _train(study: PersistentStudy, trial: optuna.Trial, values: list[float]) -> TrialOutcome:
    """Report best-so-far per epoch and ask the pruner, as the stack search does; the outcome it would tell."""
    best = -float("inf")
    for epoch, value in enumerate(values):
        best = max(best, value)
        trial.report(best, epoch)
        if trial.should_prune():
            return TrialOutcome("pruned", epochs_run=epoch + 1)
    return TrialOutcome("complete", value=best, best_epoch=values.index(best) + 1, epochs_run=len(values),
                        weights={"w": torch.ones(1)})


# -- settings, storage URLs, spaces ---------------------------------------------------------------
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
    assert SearchSettings().resolved(15, 8).batch == 8 and SearchSettings(max_epochs=3).resolved(15, 8).epochs == 3


@pytest.mark.parametrize("bad, message", [
    ({"n_trials": 0}, "n_trials=0"), ({"max_epochs": 0}, "max_epochs=0"), ({"parallel_trials": 0}, "parallel_trials=0"),
    ({"min_resource": 0}, "min_resource=0"), ({"reduction_factor": -1}, "reduction_factor=-1"),
    ({"n_startup_trials": -1}, "n_startup_trials=-1"), ({"reduction_factor": 1}, "reduction_factor=1; Hyperband"),
    ({"min_resource": 30}, "min_resource=30 exceeds max_epochs=25"),
])
def test_bad_settings_are_one_config_error(bad, message):
    with pytest.raises(ConfigError, match=message):
        SearchSettings(**bad).resolved(25, 1)


def test_settings_identity_leaves_out_the_storage():
    settings = _settings(storage="postgresql://u:secret@h/db")
    assert "storage" not in settings.identity() and "secret" not in repr(settings.identity())
    assert settings.identity()["parallel_trials"] == 1
    assert _settings(n_trials=5).identity() != _settings(n_trials=6).identity()


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


# -- ask / finish ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n_trials, parallel, sizes", [(5, 2, [2, 2, 1]), (3, 4, [3]), (2, 1, [1, 1])])
def test_ask_gives_at_most_parallel_trials_and_never_more_than_remaining(durable, n_trials, parallel, sizes):
    study = durable.open(_settings(n_trials=n_trials, n_startup_trials=1, parallel_trials=parallel))
    seen, numbers = [], []
    while study.remaining:
        batch = study.ask(SPACE)
        seen.append(len(batch))
        numbers += [t.number for t in batch]
        assert all(t.params[k] in SPACE[k] for t in batch for k in SPACE) and set(batch[0].params) == set(SPACE)
        for trial in batch:
            study.finish(trial, _train(study, trial, [0.1 * trial.number]))
    assert seen == sizes and numbers == list(range(n_trials))
    assert study.ask(SPACE) == [] and study.n_finished == n_trials and study.remaining == 0


def test_finish_stores_exactly_one_durable_trial_per_finished_trial(durable):
    study = durable.open(_settings(n_trials=4, n_startup_trials=1, parallel_trials=3, max_epochs=4))
    a, b, c = study.ask(SPACE)
    for trial in (a, b, c):
        for epoch in range(3):
            trial.report(float(trial.number + epoch), epoch)
            trial.should_prune()
    assert durable.stored() == []  # reports and pruning stay in memory while trials run
    study.finish(c, TrialOutcome("complete", value=4.0, best_epoch=3, epochs_run=3, weights={}))
    assert [t.user_attrs[NUMBER_ATTR] for t in durable.stored()] == [2]
    study.finish(a, TrialOutcome("pruned", epochs_run=3))
    study.finish(b, TrialOutcome("failed", epochs_run=1, failure="diverged: nan"))
    stored = durable.stored()
    assert [t.user_attrs[NUMBER_ATTR] for t in stored] == [2, 0, 1]  # one write each, in finishing order
    by_number = {t.user_attrs[NUMBER_ATTR]: t for t in stored}
    memory = study.study.get_trials(deepcopy=False)
    for number, trial in by_number.items():
        assert trial.state == memory[number].state and trial.params == memory[number].params
        assert trial.intermediate_values == {e: float(number + e) for e in range(3)} == memory[number].intermediate_values
    assert by_number[2].state == TrialState.COMPLETE and by_number[2].value == 4.0
    assert by_number[2].user_attrs["best_epoch"] == 3 and by_number[2].user_attrs["epochs_run"] == 3
    assert by_number[0].state == TrialState.PRUNED and by_number[1].state == TrialState.FAIL
    assert by_number[1].user_attrs[FAILURE_ATTR] == "diverged: nan"  # failed by itself: counts
    assert all(counts_toward_budget(t) for t in stored) and study.n_finished == 3 and study.remaining == 1


def test_a_finished_trial_reaches_the_rdb_in_one_write(durable, monkeypatch):
    """Per-epoch reports and the pruner's rung attributes never reach the database one by one."""
    study = durable.open(_settings(n_trials=2, n_startup_trials=2, parallel_trials=2, max_epochs=5))
    created, piecemeal = [], []
    original = RDBStorage._create_new_trial  # what both RDBStorage and Optuna's cache around it call
    monkeypatch.setattr(RDBStorage, "_create_new_trial",
                        lambda self, study_id, template_trial=None: (created.append(template_trial is not None),
                                                                     original(self, study_id, template_trial))[1])
    for name in ("set_trial_intermediate_value", "set_trial_system_attr", "set_trial_user_attr",
                 "set_trial_param", "_set_trial_param", "set_trial_state_values"):
        monkeypatch.setattr(RDBStorage, name, lambda self, *a, _n=name, **k: piecemeal.append(_n))
    for trial in study.ask(SPACE):
        study.finish(trial, _train(study, trial, [0.1, 0.2, 0.3, 0.4, 0.5]))
    assert created == [True, True] and piecemeal == []
    assert [sorted(t.intermediate_values) for t in durable.stored()] == [[0, 1, 2, 3, 4]] * 2


# -- resume -----------------------------------------------------------------------------------------
def test_resume_restores_finished_trials_at_their_numbers_and_asks_the_cut_short_ones_again(durable):
    settings = _settings(n_trials=5, n_startup_trials=2, parallel_trials=3, max_epochs=9)
    study = durable.open(settings)
    trials = study.ask(SPACE)
    assert [t.number for t in trials] == [0, 1, 2]
    values = {0: [0.5, 0.6, 0.7], 1: [0.1, 0.1, 0.1], 2: [0.4, 0.45, 0.8]}
    outcomes = {t.number: _train(study, t, values[t.number]) for t in trials}
    for number in (2, 0):  # trial 1 was running when the process was killed
        study.finish(trials[number], outcomes[number])
    original = {t.number: t for t in study.study.get_trials(deepcopy=True)}
    durable.close()

    resumed = durable.open(settings)
    restored = resumed.study.get_trials(deepcopy=True)
    assert [t.number for t in restored] == [0, 1, 2]
    for number in (0, 2):
        old, new = original[number], restored[number]
        assert (new.state, new.value, new.params, new.intermediate_values, new.user_attrs) == (
            old.state, old.value, old.params, old.intermediate_values, old.user_attrs)
        assert new.distributions == old.distributions
    cut = restored[1]  # asked again with the parameters it was trained with, running, not counted
    assert cut.state == TrialState.RUNNING and cut.params == original[1].params and not counts_toward_budget(cut)
    assert resumed.n_finished == 2 and resumed.remaining == 3

    (again,) = resumed.ask(SPACE)  # the rest of the cut batch comes first
    assert again.number == 1 and again.params == original[1].params
    resumed.finish(again, _train(resumed, again, values[1]))
    nxt, *rest = resumed.ask(SPACE)
    assert nxt.number == 3 and [t.number for t in rest] == [4]
    resumed.finish(nxt, _train(resumed, nxt, [0.2]))
    resumed.abandon(rest)
    assert sorted(t.user_attrs[NUMBER_ATTR] for t in durable.stored()) == [0, 1, 2, 3]
    durable.close()

    again_resumed = durable.open(settings)  # a second resume: trial 4 is asked again, as it was
    assert [t.number for t in again_resumed.ask(SPACE)] == [4]
    assert again_resumed.study.get_trials(deepcopy=False)[4].params == rest[0].params
    assert again_resumed.n_finished == 4 and again_resumed.remaining == 1


def test_hyperband_rungs_and_brackets_survive_the_resume(durable):
    """Several brackets: a restored trial keeps its rung attributes and its number, hence its bracket."""
    settings = _settings(n_trials=6, n_startup_trials=2, parallel_trials=3, max_epochs=9)
    study = durable.open(settings)
    trials = study.ask(SPACE)
    curves = {0: [0.1 * e for e in range(9)], 1: [0.5] * 9, 2: [0.05 * e for e in range(9)]}
    outcomes = {t.number: _train(study, t, curves[t.number]) for t in trials}
    for number in (0, 2):
        study.finish(trials[number], outcomes[number])
    original = {t.number: t for t in study.study.get_trials(deepcopy=True)}
    assert all(any(k.startswith("completed_rung_") for k in original[n].system_attrs) for n in (0, 2))
    pruner = study.study.pruner
    durable.close()

    resumed = durable.open(settings)
    restored = resumed.study.get_trials(deepcopy=True)
    for number in (0, 2):
        assert restored[number].system_attrs == original[number].system_attrs
        assert pruner._get_bracket_id(resumed.study, restored[number]) == pruner._get_bracket_id(
            study.study, original[number])
    assert resumed.study.study_name == study.study.study_name


def test_resumed_pruner_decides_as_an_uninterrupted_one(durable):
    """One bracket (2 epochs, rung 0 at the second report): the restored rung values are the competition."""
    settings = _settings(n_trials=5, n_startup_trials=1, parallel_trials=3, max_epochs=2)
    study = durable.open(settings)
    trials = study.ask(SPACE)
    study.finish(trials[0], _train(study, trials[0], [0.5, 1.0]))
    study.finish(trials[2], _train(study, trials[2], [0.5, 0.9]))
    twin = study.study  # the uninterrupted search: trial 1 is cut short by an interruption there too
    study.abandon([trials[1]])
    durable.close()
    resumed = durable.open(settings)

    def decisions(s: optuna.Study) -> list[bool]:
        trial = s.ask()
        assert trial.number == 3
        out = []
        for epoch, value in enumerate([0.5, 0.5]):
            trial.report(value, epoch)
            out.append(trial.should_prune())
        return out

    assert decisions(resumed.study) == decisions(twin) == [False, True]  # pruned by the restored trials' rungs
    fresh = optuna.create_study(direction="maximize", pruner=settings.pruner())
    for _ in range(3):
        fresh.tell(fresh.ask(), state=TrialState.FAIL)
    assert decisions(fresh) == [False, False]  # without their rung values it would have been promoted


def test_abandon_fails_running_trials_without_counting_them(durable):
    settings = _settings(n_trials=4, n_startup_trials=1, parallel_trials=3)
    study = durable.open(settings)
    a, b, c = study.ask(SPACE)
    study.finish(a, _train(study, a, [0.3]))
    b.report(0.2, 0)
    study.abandon([a, b, c])  # the finished one is left as it is
    states = [t.state for t in study.study.get_trials(deepcopy=False)]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL]
    assert not any(FAILURE_ATTR in t.user_attrs for t in study.study.get_trials(deepcopy=False)[1:])
    assert study.n_finished == 1 and study.remaining == 3
    assert [t.user_attrs[NUMBER_ATTR] for t in durable.stored()] == [0]  # nothing abandoned is stored
    assert [t.number for t in study.ask(SPACE)] == [3, 4, 5]


def test_a_trial_failed_by_itself_counts_and_is_restored(durable):
    settings = _settings(n_trials=3, n_startup_trials=1, parallel_trials=2)
    study = durable.open(settings)
    a, b = study.ask(SPACE)
    study.finish(b, TrialOutcome("failed", epochs_run=2, failure="diverged: non-finite training loss at epoch 2"))
    study.abandon([a])
    assert study.n_finished == 1
    durable.close()
    resumed = durable.open(settings)
    restored = resumed.study.get_trials(deepcopy=False)
    assert [t.state for t in restored] == [TrialState.RUNNING, TrialState.FAIL]
    assert restored[0].params == a.params and restored[1].user_attrs[FAILURE_ATTR].startswith("diverged")
    assert restored[1].params == b.params and resumed.n_finished == 1 and resumed.remaining == 2
    assert [t.number for t in resumed.ask(SPACE)] == [0]  # the trial cut short, asked again


def test_journal_storage_resumes(tmp_path):
    url = storage_url("journal:{work_dir}/journal/{job_id}-{repeat}.log", tmp_path, "j", 0)
    settings = _settings(n_trials=2, n_startup_trials=1, parallel_trials=2)
    study = PersistentStudy(open_storage(url), "j", settings, seed=1)
    for trial in study.ask(SPACE):
        study.finish(trial, _train(study, trial, [0.1 * trial.number]))
    again = PersistentStudy(open_storage(url), "j", _settings(n_trials=3, n_startup_trials=1, parallel_trials=2),
                            seed=1)
    assert again.n_finished == 2 and again.remaining == 1
    assert [t.params for t in again.study.get_trials()] == [t.params for t in study.study.get_trials()]
    assert (tmp_path / "journal" / "j-0.log").exists()


# -- selection and records ------------------------------------------------------------------------
def test_best_trial_ties_and_search_failed():
    study = optuna.create_study(direction="maximize")
    with pytest.raises(SearchFailed, match="no trial of 0 completed"):
        best_trial(study)
    failed = study.ask()
    failed.set_user_attr(FAILURE_ATTR, "diverged: non-finite training loss at epoch 1")
    study.tell(failed, state=TrialState.FAIL)
    study.tell(study.ask(), state=TrialState.PRUNED)
    with pytest.raises(SearchFailed, match=r"no trial of 2 completed \(diverged: non-finite"):
        best_trial(study)
    for value in (0.5, 0.9, 0.9):
        study.tell(study.ask(), value)
    assert best_trial(study).number == 3  # the lowest number wins the tie
    pruned_only = optuna.create_study(direction="maximize")
    pruned_only.tell(pruned_only.ask(), state=TrialState.PRUNED)
    with pytest.raises(SearchFailed, match="1 pruned, none complete"):
        best_trial(pruned_only)


def test_study_record_holds_every_trial(durable):
    study = durable.open(_settings(n_trials=3, n_startup_trials=1, parallel_trials=3, max_epochs=9))
    a, b, c = study.ask(SPACE)
    study.finish(a, _train(study, a, [0.2, 0.4]))
    study.finish(b, TrialOutcome("failed", epochs_run=1, failure="diverged: nan"))
    study.abandon([c])
    record = study_record(study.study)
    assert record["study_name"] == "job-repeat0" and record["n_trials"] == 3
    first, second, third = record["trials"]
    assert first["state"] == "COMPLETE" and first["value"] == 0.4 and set(first["params"]) == set(SPACE)
    assert first["intermediate_values"] == {"0": 0.2, "1": 0.4} and first["user_attrs"]["best_epoch"] == 2
    assert first["user_attrs"][NUMBER_ATTR] == 0 and first["seconds"] is not None and first["seconds"] >= 0
    assert second["state"] == "FAIL" and second["user_attrs"][FAILURE_ATTR] == "diverged: nan"
    assert third["state"] == "FAIL" and FAILURE_ATTR not in third["user_attrs"]
    assert n_finished(study.study) == 2


def test_trial_weights_keep_only_the_best(tmp_path):
    study = optuna.create_study(direction="maximize")
    store = TrialWeights(tmp_path / "w")
    assert store.load(0) is None
    for value in (0.5, 0.2, 0.8, 0.8):
        trial = study.ask()
        store.offer(study, trial.number, value, {"w": torch.full((2,), value)})
        study.tell(trial, value)
        store.drop_losers(study)
    assert sorted(p.name for p in (tmp_path / "w").glob("*.pt")) == ["trial2.pt"]
    assert torch.equal(store.load(2)["w"], torch.full((2,), 0.8))
    store.keep_best(study, 2)
    assert store.load(2) is not None


def test_the_stored_winner_keeps_its_weights_until_a_better_trial_is_told(tmp_path):
    """A kill between saving a new best and telling it must leave the told winner's file on disk."""
    study = optuna.create_study(direction="maximize")
    store = TrialWeights(tmp_path / "w")
    first = study.ask()
    store.offer(study, first.number, 0.5, {"w": torch.zeros(2)})
    study.tell(first, 0.5)
    second = study.ask()
    assert store.offer(study, second.number, 0.9, {"w": torch.ones(2)})
    assert store.load(0) is not None and store.load(1) is not None  # trial 1 is not told yet
    study.tell(second, 0.9)
    store.drop_losers(study)
    assert store.load(0) is None and store.load(1) is not None
