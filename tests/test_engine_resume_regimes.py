"""Resume changes no number (issue 30 item 1): a stacked MLP search and a stacked finetune search killed at
each point of their work, then run again, give every number of an uninterrupted run.

The kill is simulated in this process (a ``BaseException`` raised where a signal would land): nothing in
memory survives it, and what is on disk is exactly what a ``kill -9`` at that point leaves, since a running
trial never reaches the storage. ``tests/test_engine_resume_kill.py`` kills real processes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import optuna
import pytest

from ppgbench_pl.hpo import optuna_search
from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.regimes import neural
from ppgbench_pl.regimes.finetune import FinetuneRegime
from ppgbench_pl.regimes.mlp import MLPRegime
from tests.regimes.neural_helpers import (
    Killed,
    context,
    one_thread,  # noqa: F401 - the autouse fixture
    small_cnn_data,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return small_cnn_data(tmp_path_factory.mktemp("resume_data"))


class Kill:
    """Raise :class:`Killed` once, at the first call of a patched function that meets ``when``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch, self.fired = monkeypatch, False

    def at(self, owner: Any, name: str, when: Callable[..., bool], after: bool = False) -> None:
        """Patch ``owner.name``: die before the call (or, with ``after``, once it returned) when ``when(*args)``."""
        original = getattr(owner, name)

        def patched(*args: Any, **kwargs: Any) -> Any:
            if not after and not self.fired and when(*args, **kwargs):
                self.fired = True
                raise Killed
            out = original(*args, **kwargs)
            if after and not self.fired and when(*args, **kwargs):
                self.fired = True
                raise Killed
            return out

        self.monkeypatch.setattr(owner, name, patched)


def arm(kill: Kill, point: str, batch: int) -> None:
    """Where the kill lands, for a search asking ``batch`` trials together."""
    if point == "before the first report":
        kill.at(optuna.trial.Trial, "report", lambda *a: True)
    elif point == "between trials":  # the first batch stored, the next not asked yet
        kill.at(optuna_search.PersistentStudy, "finish", lambda study, trial, outcome: trial.number == batch - 1,
                after=True)
    elif point == "mid-trial":  # the second epoch of a trial of the second batch
        kill.at(optuna.trial.Trial, "report", lambda trial, value, step: trial.number >= batch and step == 1)
    elif point == "mid-batch":  # the second batch's first trial stored, its second not
        kill.at(optuna_search.PersistentStudy, "finish", lambda study, trial, outcome: trial.number == batch,
                after=True)
    elif point == "during the refit":  # after the refit's first epoch
        kill.at(neural, "fixed_epochs", lambda *a: True, after=True)
    else:
        raise AssertionError(point)


def _comparable(outcomes: list) -> list[dict[str, Any]]:
    """Every field of each repeat's outcome but timing and the storage location (the work folder differs)."""
    out = []
    for outcome in outcomes:
        details = copy.deepcopy(outcome.details)
        details["optuna"].pop("storage")
        for trial in details["optuna"]["trials"]:
            trial.pop("seconds")
        out.append({"metrics": outcome.metrics, "params": outcome.params, "details": details,
                    "predictions": {k: (v.dtype.str, v.shape, v.tolist()) for k, v in outcome.predictions.items()}})
    return out


def _check(make_ctx: Callable[[str], Any], make_regime: Callable[[], Any], points: list[str], batch: int,
           monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill a run at each point in turn (each run resuming the last), then finish it; compare with a whole run."""
    expected = _comparable(make_regime().run(make_ctx("whole")))
    for point in points:
        kill = Kill(monkeypatch)
        arm(kill, point, batch)
        with pytest.raises(Killed):
            make_regime().run(make_ctx("killed"))
        assert kill.fired, point
        monkeypatch.undo()
    resumed = _comparable(make_regime().run(make_ctx("killed")))
    assert len(resumed[0]["details"]["optuna"]["trials"]) == len(expected[0]["details"]["optuna"]["trials"])
    assert resumed == expected, points


def _mlp(data, tmp_path, refit: bool) -> tuple[Callable[[str], Any], Callable[[], Any]]:
    """Subject-level stiffness: the 3 repeats' studies train side by side in one stack, one trial each at a time."""
    dm, encoder, emb = data
    return (lambda name: context(dm, encoder, "synthetic-stiffness", tmp_path / name / "job", emb),
            lambda: MLPRegime(SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=3), refit=refit))


def _finetune(data, tmp_path, refit: bool) -> tuple[Callable[[str], Any], Callable[[], Any]]:
    """Two trials asked together and trained as one stack; two batches, the second drawn by TPE."""
    dm, encoder, _ = data  # one encoder: every search starts from the same pristine weights (never changed)
    return (lambda name: context(dm, encoder, "synthetic-hr", tmp_path / name / "job"),
            lambda: FinetuneRegime(SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=2, parallel_trials=2),
                                   search_space={"batch_size": [16, 32], "head_lr": [1e-3, 1e-4]}, refit=refit))


MLP_POINTS = ["before the first report", "between trials", "mid-trial", "during the refit"]
FINETUNE_POINTS = ["before the first report", "between trials", "mid-trial", "mid-batch", "during the refit"]


def test_a_stacked_mlp_search_killed_at_every_point_in_turn_resumes_to_the_uninterrupted_numbers(
        data, tmp_path, monkeypatch):
    _check(*_mlp(data, tmp_path, refit=True), MLP_POINTS, 1, monkeypatch)


def test_a_stacked_finetune_search_killed_at_every_point_in_turn_resumes_to_the_uninterrupted_numbers(
        data, tmp_path, monkeypatch):
    _check(*_finetune(data, tmp_path, refit=True), FINETUNE_POINTS, 2, monkeypatch)


ALONE = [(regime, point, refit) for regime, points in (("mlp", MLP_POINTS), ("finetune", FINETUNE_POINTS))
         for point in points for refit in (False, True) if refit or point != "during the refit"]


@pytest.mark.slow
@pytest.mark.parametrize(("regime", "point", "refit"), ALONE)
def test_each_kill_point_alone(data, tmp_path, monkeypatch, regime, point, refit):
    """Each point alone, with and without the refit (the published path tests the best epoch's stored weights)."""
    make = _mlp if regime == "mlp" else _finetune
    _check(*make(data, tmp_path, refit), [point], 1 if regime == "mlp" else 2, monkeypatch)
