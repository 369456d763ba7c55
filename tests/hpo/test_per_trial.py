"""Trials fitted one ``Trainer.fit`` each (a callback that is not stack-aware) are the trials of the stack.

The same studies as ``test_trial_stack.py`` (2 folds x 2 repeats, batch sizes 16 and 64, pruning) searched
once in one stacked fit and once with a no-op stock-style callback, which sends every trial to a fit of its
own: the same values per epoch, Hyperband decisions and rung bookkeeping; and a whole job gives the same
winner, test metrics and predictions.
"""

from __future__ import annotations

import numpy as np
import pytest
from lightning.pytorch.callbacks import Callback

from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.hpo.per_trial import TrialModule, stack_aware
from ppgbench_pl.regimes.finetune import FinetuneRegime
from ppgbench_pl.regimes.mlp import MLPRegime
from tests.hpo.test_trial_stack import (
    FT_SEARCH,
    FT_SPACE,
    MLP_SPACE,
    REPEATS,
    SEARCH,
    _assert_same_search,
    _assert_search_is_informative,
    _ctx,
    _search,
)
from tests.regimes.neural_helpers import (
    Killed,
    kill_on_ask,
    one_thread,  # noqa: F401 - the autouse fixture
    small_cnn_data,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The data of ``test_trial_stack.py``: 20 windows per subject, the small CNN and its embeddings."""
    return small_cnn_data(tmp_path_factory.mktemp("per_trial_data"), synthetic_windows=20)


class NoOp(Callback):
    """A callback written for plain Lightning (no stack marker): it records the modules it was fitted with.

    Each trial's fit gets its own copy of the callback, so the record is a list the copies share.
    """

    def __init__(self) -> None:
        self.modules: list[str] = []

    def __deepcopy__(self, memo):
        copied = NoOp()
        copied.modules = self.modules  # shared on purpose: the test reads every trial's fit from the original
        copied.copies = getattr(self, "copies", 0) + 1
        return copied

    def on_fit_start(self, trainer, pl_module) -> None:
        assert isinstance(pl_module, TrialModule) and trainer.max_epochs == pl_module.slot.max_epochs
        assert getattr(self, "copies", 0) == 1 and self in trainer.callbacks  # a fresh copy per fit
        self.modules.append(pl_module.slot.name)


def test_stack_awareness_is_an_explicit_marker():
    class Aware(Callback):
        ppgbench_stack_aware = True

    assert stack_aware([]) and stack_aware([Aware()])
    assert not stack_aware([NoOp()]) and not stack_aware([Aware(), NoOp()])


def test_mlp_trials_fitted_one_by_one_are_the_stacked_trials(data, tmp_path):
    regime = MLPRegime(SEARCH, subject_repeats=REPEATS, search_space=MLP_SPACE, standardize_targets=True)
    stacked = _search(regime, tmp_path / "stacked", data, stacked=True)
    noop = NoOp()
    alone = _search(regime, tmp_path / "alone", data, stacked=True, callbacks=[noop])
    assert sorted(noop.modules) == sorted(f"{k}/{t.number}" for k, ts in stacked.items() for t in ts)
    _assert_search_is_informative(stacked, SEARCH.n_trials)
    _assert_same_search(stacked, alone)


def test_finetune_trials_fitted_one_by_one_are_the_stacked_trials(data, tmp_path):
    regime = FinetuneRegime(FT_SEARCH, subject_repeats=REPEATS, search_space=FT_SPACE, standardize_targets=True)
    stacked = _search(regime, tmp_path / "stacked", data, stacked=True)
    noop = NoOp()
    alone = _search(regime, tmp_path / "alone", data, stacked=True, callbacks=[noop])
    assert len(noop.modules) == sum(len(ts) for ts in stacked.values())
    _assert_search_is_informative(stacked, FT_SEARCH.n_trials)
    _assert_same_search(stacked, alone)


@pytest.mark.parametrize("refit", [False, True])
def test_a_job_fitted_one_trial_at_a_time_has_the_stacks_winner_metrics_and_predictions(data, tmp_path, refit):
    regime = MLPRegime(SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=3, parallel_trials=2),
                       subject_repeats=1, search_space=MLP_SPACE, refit=refit)
    noop = NoOp()
    (stacked,) = regime.run(_ctx(data, 0, tmp_path / "stacked"))
    (alone,) = regime.run(_ctx(data, 0, tmp_path / "alone", [noop]))
    assert len(noop.modules) == 4 + refit  # every trial, and the refit, in a fit of its own
    assert alone.details.pop("trial_fits").startswith("one Trainer.fit per trial")
    assert "trial_fits" not in stacked.details  # the stacked record is as before
    assert alone.details["callbacks"] == ["NoOp"]
    alone.details["callbacks"] = []
    for outcome in (stacked, alone):  # the study's storage is in each run's own folder; timings differ
        outcome.details["optuna"].pop("storage")
        assert all(trial.pop("seconds") >= 0 for trial in outcome.details["optuna"]["trials"])
    assert stacked.details == alone.details and stacked.params == alone.params
    assert stacked.metrics == alone.metrics
    assert stacked.predictions.keys() == alone.predictions.keys()
    for key, value in stacked.predictions.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(value, alone.predictions[key], rtol=1e-6)
        else:
            assert np.array_equal(value, alone.predictions[key])


class KillInFit(Callback):
    """Raises :class:`Killed` in the first epoch of the ``nth`` trial fit of the process (a kill inside a batch)."""

    fits: list[int] = []

    def __init__(self, nth: int) -> None:
        self.nth = nth

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch == 0:
            self.fits.append(1)
            if len(self.fits) == self.nth:
                raise Killed


@pytest.mark.parametrize("where", ["between batches", "inside a trial's fit"])
def test_a_per_trial_search_killed_and_resumed_is_the_uninterrupted_one(data, tmp_path, monkeypatch, where):
    """The resumed study replays its sampler (hpo/replay.py): the TPE-sampled second batch is the same."""
    from ppgbench_pl.hpo.stack_search import StackSearch

    search = SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=2, parallel_trials=2)
    regime = MLPRegime(search, subject_repeats=1, search_space={"dropout": [0.3], "hidden_dim": [32]})
    (whole,) = regime.run(_ctx(data, 0, tmp_path / "whole", [NoOp()]))
    KillInFit.fits = []
    killer = KillInFit(nth=4 if where != "between batches" else 99)  # trial 3: the 2nd of the 2nd batch
    original = StackSearch.ask
    if where == "between batches":
        kill_on_ask(monkeypatch, 2)
    with pytest.raises(Killed):
        regime.run(_ctx(data, 0, tmp_path / "cut", [NoOp(), killer]))
    monkeypatch.setattr(StackSearch, "ask", original)
    (resumed,) = regime.run(_ctx(data, 0, tmp_path / "cut", [NoOp()]))

    def trials(outcome):
        return [{k: v for k, v in t.items() if k != "seconds"} for t in outcome.details["optuna"]["trials"]]

    assert len(trials(whole)) == 4 and trials(resumed) == trials(whole)
    assert resumed.metrics == whole.metrics and resumed.details["winner"] == whole.details["winner"]
