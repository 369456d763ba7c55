"""Optuna TPE + Hyperband studies on persistent storage (SQLite in the job folder by default), by ask/tell."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, Trial, TrialState
from sqlalchemy import event

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo.replay import OFF_PATH_ATTR, resume
from ppgbench_pl.hpo.spaces import distributions

#: User attribute holding the reason a trial failed by itself (counts toward the budget).
FAILURE_ATTR = "failure"


class SearchFailed(RuntimeError):
    """No trial of a study completed, so there is no winner (the job fails with this reason)."""


@dataclass(frozen=True)
class SearchSettings:
    """The Optuna budget of a neural regime (YAML: ``init_args: {search: {n_trials: 12}}``).

    ``None`` for ``max_epochs`` or ``parallel_trials`` means the regime's published value (:meth:`resolved`).

    Args:
        n_trials: Finished trials per study (48 published).
        n_startup_trials: Random trials before TPE (8).
        max_epochs: Hyperband max resource and epoch budget (25 MLP, 15 finetune).
        min_resource: Hyperband min resource in epochs (1).
        reduction_factor: Hyperband reduction factor (3).
        parallel_trials: Trials asked from TPE together (constant liar) and trained together as one stacked
            model (1 MLP, 8 finetune published).
        storage: ``None`` (SQLite in the job folder), an SQLAlchemy URL or ``journal:<path>``, with
            ``{job_id}``, ``{repeat}``, ``{search_seed}``, ``{work_dir}``; not in the run identity.
    """

    n_trials: int = 48
    n_startup_trials: int = 8
    max_epochs: int | None = None
    min_resource: int = 1
    reduction_factor: int = 3
    parallel_trials: int | None = None
    storage: str | None = None

    def resolved(self, max_epochs: int, parallel_trials: int) -> SearchSettings:
        """These settings with a regime's defaults filled in, validated (``ConfigError`` for a bad count)."""
        epochs = self.max_epochs if self.max_epochs is not None else max_epochs
        parallel = self.parallel_trials if self.parallel_trials is not None else parallel_trials
        out = replace(self, max_epochs=epochs, parallel_trials=parallel)
        counts = {"n_trials": out.n_trials, "max_epochs": out.max_epochs, "min_resource": out.min_resource,
                  "reduction_factor": out.reduction_factor, "parallel_trials": out.parallel_trials}
        bad = [f"{k}={v}" for k, v in counts.items() if v is None or v < 1]
        if out.n_startup_trials < 0:
            bad.append(f"n_startup_trials={out.n_startup_trials}")
        if bad:
            raise ConfigError(f"search: {', '.join(bad)}; counts must be >= 1 (n_startup_trials >= 0)")
        if out.reduction_factor < 2:  # Hyperband divides by log(reduction_factor)
            raise ConfigError(f"search: reduction_factor={out.reduction_factor}; Hyperband needs >= 2")
        if out.min_resource > epochs:  # Optuna would build no bracket, so nothing would ever be pruned
            raise ConfigError(f"search: min_resource={out.min_resource} exceeds max_epochs={epochs}; "
                              "Hyperband needs min_resource <= max_epochs")
        return out

    @property
    def epochs(self) -> int:
        """The epoch budget (after :meth:`resolved`)."""
        assert self.max_epochs is not None
        return self.max_epochs

    @property
    def batch(self) -> int:
        """Trials asked together (after :meth:`resolved`)."""
        assert self.parallel_trials is not None
        return self.parallel_trials

    def identity(self) -> dict[str, Any]:
        """The settings that change results (everything but the storage location)."""
        return {k: v for k, v in asdict(self).items() if k != "storage"}

    def sampler(self, seed: int) -> optuna.samplers.TPESampler:
        """TPE, seeded with r, multivariate and grouped, with constant liar for pending trials."""
        with warnings.catch_warnings():  # ``group`` is experimental in Optuna 5; the protocol uses it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(n_startup_trials=self.n_startup_trials, multivariate=True,
                                              group=True, constant_liar=True, seed=seed)

    def pruner(self) -> optuna.pruners.HyperbandPruner:
        """Hyperband over epochs."""
        return optuna.pruners.HyperbandPruner(min_resource=self.min_resource, max_resource=self.epochs,
                                              reduction_factor=self.reduction_factor)


@dataclass
class TrialOutcome:
    """What an engine reports for one trial: state, best score and its 1-based epoch, failure, best weights."""

    state: Literal["complete", "pruned", "failed"]
    value: float | None = None
    best_epoch: int | None = None
    epochs_run: int = 0
    failure: str | None = None
    weights: dict[str, Any] | None = field(default=None, repr=False)


def storage_url(template: str | None, work_dir: Path, job_id: str, repeat: int, search_seed: int = 0) -> str:
    """The storage of one study: SQLite in ``work_dir/repeat<r>[_search<k>]/`` by default, else the template filled."""
    if template is None:
        folder = f"repeat{repeat}" + (f"_search{search_seed}" if search_seed else "")
        path = Path(work_dir) / folder / "optuna.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path.resolve()}"
    return template.format(job_id=job_id, repeat=repeat, search_seed=search_seed, work_dir=str(work_dir))


def _sqlite_pragmas(dbapi_connection: Any, connection_record: Any) -> None:
    """``synchronous=NORMAL``: ~6x faster commits; survives a killed process, a power cut is a small risk."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def open_storage(url: str) -> BaseStorage:
    """RDB storage for SQLAlchemy URLs (SQLite waits on locks), JournalStorage for ``journal:<path>``."""
    if url.startswith("journal:"):
        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if not url.startswith("sqlite"):
        return RDBStorage(url)
    storage = RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    storage.engine.dispose()  # connections opened while creating the schema; new ones get the pragma
    event.listen(storage.engine, "connect", _sqlite_pragmas)
    return storage


def close_storage(storage: BaseStorage) -> None:
    """Release database connections (many studies are opened over a run)."""
    if isinstance(storage, RDBStorage):
        storage.remove_session()
        storage.engine.dispose()


def counts_toward_budget(trial: FrozenTrial) -> bool:
    """Complete, pruned, or failed by itself (divergence); not cut short by an interruption."""
    failed_itself = trial.state == TrialState.FAIL and FAILURE_ATTR in trial.user_attrs
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED) or failed_itself


def n_finished(study: optuna.Study) -> int:
    """Trials that count toward the budget."""
    return sum(counts_toward_budget(t) for t in study.get_trials(deepcopy=False))


#: User attribute holding a trial's number in the search (the durable copy may number trials otherwise).
NUMBER_ATTR = "number"


class PersistentStudy:
    """A study searched in memory, stored a finished trial at a time; a resume replays it (``space``: ask order)."""

    def __init__(self, storage: BaseStorage, name: str, settings: SearchSettings, seed: int,
                 space: Mapping[str, Sequence[Any]] | None = None) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # inner searches run by the hundred
        self.settings = settings
        self.durable = optuna.create_study(storage=storage, study_name=name, direction="maximize",
                                           load_if_exists=True)
        self.study = optuna.create_study(storage=optuna.storages.InMemoryStorage(), study_name=name,
                                         direction="maximize", sampler=settings.sampler(seed),
                                         pruner=settings.pruner())
        #: Why the stored history could not be replayed (the search then can draw other trials), or None.
        self.off_path: str | None = None
        self._pending: list[Trial] = []
        finished = {int(t.user_attrs.get(NUMBER_ATTR, t.number)): t
                    for t in self.durable.get_trials(deepcopy=False) if counts_toward_budget(t)}
        if finished:  # restored at their numbers; the first trial's distributions when no space is given
            dists = distributions(space) if space is not None else dict(finished[min(finished)].distributions)
            self._pending, self.off_path = resume(self.study, finished, settings.sampler(seed), settings.n_trials,
                                                  settings.batch, dists)

    @property
    def n_finished(self) -> int:
        """Trials that count toward the budget."""
        return n_finished(self.study)

    @property
    def remaining(self) -> int:
        """Trials still to finish."""
        return max(self.settings.n_trials - self.n_finished, 0)

    def ask(self, space: Mapping[str, Sequence[Any]]) -> list[Trial]:
        """Up to ``parallel_trials`` trials asked together (after a resume: first the rest of the cut batch)."""
        if self._pending:
            pending, self._pending = self._pending, []
            return pending
        dists = distributions(space)
        return [self.study.ask(fixed_distributions=dict(dists))
                for _ in range(min(self.settings.batch, self.remaining))]

    def finish(self, trial: Trial, outcome: TrialOutcome) -> None:
        """Tell the in-memory study the outcome, then store the finished trial durably (one write)."""
        trial.set_user_attr(NUMBER_ATTR, trial.number)
        if self.off_path is not None:
            trial.set_user_attr(OFF_PATH_ATTR, self.off_path)
        tell(self.study, trial, outcome)
        frozen = self.study.get_trials(deepcopy=True)[trial.number]
        self.durable.add_trial(frozen)

    def abandon(self, trials: Sequence[Trial]) -> None:
        """Fail trials cut short by an interruption (no failure attribute: they do not count)."""
        for trial in trials:
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)


def tell(study: optuna.Study, trial: Trial, outcome: TrialOutcome) -> None:
    """Record an outcome: user attributes first, then the final state."""
    trial.set_user_attr("epochs_run", outcome.epochs_run)
    if outcome.best_epoch is not None:
        trial.set_user_attr("best_epoch", outcome.best_epoch)
    if outcome.state == "complete":
        assert outcome.value is not None and math.isfinite(outcome.value)
        study.tell(trial, outcome.value)
    elif outcome.state == "pruned":
        study.tell(trial, state=TrialState.PRUNED)
    else:
        trial.set_user_attr(FAILURE_ATTR, outcome.failure or "failed")
        study.tell(trial, state=TrialState.FAIL)


def best_trial(study: optuna.Study) -> FrozenTrial:
    """The best complete trial by its best-epoch score, lowest number on ties (``SearchFailed`` if none)."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        trials = study.get_trials(deepcopy=False)
        reasons = sorted({str(t.user_attrs[FAILURE_ATTR]) for t in trials if FAILURE_ATTR in t.user_attrs})
        pruned = sum(t.state == TrialState.PRUNED for t in trials)
        detail = "; ".join(reasons) if reasons else f"{pruned} pruned, none complete"
        raise SearchFailed(f"no trial of {len(trials)} completed ({detail})")
    return max(complete, key=lambda t: (float(t.value), -t.number))  # type: ignore[arg-type]


def study_record(study: optuna.Study) -> dict[str, Any]:
    """Every trial: number, state, value, params, per-epoch intermediate values, user attributes, duration."""
    trials = []
    for t in study.get_trials(deepcopy=False):
        duration = t.duration.total_seconds() if t.duration is not None else None
        trials.append({
            "number": t.number, "state": t.state.name, "value": t.value, "params": dict(t.params),
            "intermediate_values": {str(k): v for k, v in sorted(t.intermediate_values.items())},
            "user_attrs": dict(t.user_attrs), "seconds": duration,
        })
    return {"study_name": study.study_name, "n_trials": len(trials), "trials": trials}
