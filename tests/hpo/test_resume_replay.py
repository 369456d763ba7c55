"""A study resumed after a kill continues on the uninterrupted search's path (issue 30 item 1, decision #41).

A small driver searches as :class:`~ppgbench_pl.hpo.stack_search.StackSearch` does (ask a batch, every trial
reports each epoch before any asks the pruner, tell the batch in trial order) with outcomes that are a pure
function of a trial's parameters, so any difference between a killed-and-resumed search and an uninterrupted
one can only come from the search itself.
"""

from __future__ import annotations

import math
import warnings

import optuna
import pytest
import torch

from ppgbench_pl.hpo.optuna_search import PersistentStudy, SearchSettings, TrialOutcome, study_record
from ppgbench_pl.hpo.replay import OFF_PATH_ATTR

SPACE = {"lr": [1e-4, 1e-3, 1e-2], "batch_size": [16, 32, 64], "dropout": [0.0, 0.3]}


class Killed(Exception):
    """Where the process would have died (everything in memory is dropped)."""


def _curve(params: dict, epochs: int) -> list[float] | None:
    """Validation scores per epoch (None: diverges before its first epoch, a failure that counts)."""
    if params["lr"] == 1e-2 and params["batch_size"] == 16:
        return None
    base = -abs(math.log10(params["lr"]) + 3) - params["batch_size"] / 100 - params["dropout"]
    return [base + 0.1 * (e + 1) * (1 + params["dropout"]) for e in range(epochs)]


class Storage:
    """Durable storage that outlives the killed "process" (in memory here: the regime tests use SQLite files)."""

    def __init__(self) -> None:
        self.storage, self.name = optuna.storages.InMemoryStorage(), "job-repeat0"

    def open_storage(self) -> optuna.storages.BaseStorage:
        return self.storage

    def stored(self) -> list[optuna.trial.FrozenTrial]:
        return optuna.load_study(study_name=self.name, storage=self.storage).get_trials(deepcopy=True)


class Driver:
    """One process of a search: open the study, train batch after batch, die at event ``kill_at``."""

    def __init__(self, durable: Storage, settings: SearchSettings, kill_at: int | None = None,
                 kill_on: str = "") -> None:
        self.study = PersistentStudy(durable.open_storage(), durable.name, settings, seed=7, space=SPACE)
        self.settings, self.kill_at, self.kill_on, self.events = settings, kill_at, kill_on, 0

    def tick(self, kind: str) -> None:
        """One event (a report, a pruner decision, a tell); the kill lands after event ``kill_at`` or ``kill_on``."""
        self.events += 1
        if self.events == self.kill_at or kind == self.kill_on:
            raise Killed

    def run(self) -> dict:
        study, epochs = self.study, self.settings.epochs
        while study.remaining:
            trials = study.ask(SPACE)
            curves = {t.number: _curve(t.params, epochs) for t in trials}
            outcomes: dict[int, TrialOutcome] = {}
            best = {t.number: -math.inf for t in trials}
            for t in trials:
                if curves[t.number] is None:
                    outcomes[t.number] = TrialOutcome("failed", epochs_run=1, failure="diverged")
            for epoch in range(epochs):
                live = [t for t in trials if t.number not in outcomes]
                for t in live:
                    best[t.number] = max(best[t.number], curves[t.number][epoch])
                    t.report(best[t.number], epoch)
                    self.tick("report")
                for t in live:
                    if t.should_prune():
                        outcomes[t.number] = TrialOutcome("pruned", epochs_run=epoch + 1)
                    elif epoch + 1 == epochs:
                        outcomes[t.number] = TrialOutcome("complete", value=best[t.number], best_epoch=epochs,
                                                          epochs_run=epochs, weights={"w": torch.ones(1)})
                    self.tick("prune")
            for t in trials:
                study.finish(t, outcomes[t.number])
                self.tick("tell")
        return _record(study.study)


def _record(study: optuna.Study) -> list[dict]:
    return [{k: v for k, v in t.items() if k != "seconds"} for t in study_record(study)["trials"]]


def _settings(parallel: int) -> SearchSettings:
    return SearchSettings(n_trials=9, n_startup_trials=3, max_epochs=4, reduction_factor=2,
                          parallel_trials=parallel).resolved(4, parallel)


@pytest.mark.parametrize("parallel", [1, 3])
def test_a_search_killed_anywhere_resumes_to_the_uninterrupted_trials(tmp_path, parallel):
    settings = _settings(parallel)
    whole = Storage()
    driver = Driver(whole, settings)
    expected = driver.run()
    assert len(expected) == 9 and {t["state"] for t in expected} == {"COMPLETE", "PRUNED", "FAIL"}
    assert len({tuple(t["params"].values()) for t in expected}) > 5  # TPE moved on from the start-up draws
    for kill_at in range(1, driver.events, 2 if parallel == 1 else 3):
        durable = Storage()
        with pytest.raises(Killed):
            Driver(durable, settings, kill_at).run()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a replayable history resumes without a warning
            resumed = Driver(durable, settings)
            assert resumed.run() == expected, f"killed at event {kill_at}"


def test_the_rest_of_a_batch_cut_short_is_trained_with_its_own_parameters(tmp_path):
    settings = _settings(3)
    expected = Driver(Storage(), settings).run()
    durable = Storage()
    with pytest.raises(Killed):  # the kill lands after the first batch's first tell: trial 0 stored, 1 and 2 not
        Driver(durable, settings, kill_on="tell").run()
    assert [t.user_attrs["number"] for t in durable.stored()] == [0]
    study = PersistentStudy(durable.open_storage(), durable.name, settings, seed=7, space=SPACE)
    again = study.ask(SPACE)
    assert [t.number for t in again] == [1, 2]
    assert [t.params for t in again] == [expected[1]["params"], expected[2]["params"]]
    assert [t.number for t in study.ask(SPACE)] == [3, 4, 5]  # then the next whole batch


def test_a_history_that_cannot_be_replayed_resumes_as_before_and_says_so(tmp_path):
    settings = _settings(1)
    durable = Storage()
    study = PersistentStudy(durable.open_storage(), durable.name, settings, seed=7, space=SPACE)
    (trial,) = study.ask(SPACE)
    other = {k: v for k, v in trial.params.items()}
    other["lr"] = next(v for v in SPACE["lr"] if v != trial.params["lr"])  # what another sampler drew
    study.durable.add_trial(optuna.trial.create_trial(
        params=other, distributions=dict(trial.distributions), value=0.5, user_attrs={"number": 0}))
    with pytest.warns(UserWarning, match="cannot be replayed.*trial 0 was stored with"):
        resumed = Driver(durable, settings)
    records = resumed.run()
    assert records[0]["params"] == other and OFF_PATH_ATTR not in records[0]["user_attrs"]
    assert all(OFF_PATH_ATTR in t["user_attrs"] for t in records[1:])
