"""Optuna TPE + Hyperband studies on persistent storage, driven by ask/tell (PROTOCOL.md 4.5).

One study per (job, repeat). The default storage is an SQLite file in the job's persistent work folder,
created with ``load_if_exists=True`` so an interrupted search resumes from the stored trials: samplers
and pruners are not persisted, so they are passed again on load, and only *finished* trials count
toward the budget (complete, pruned, or failed by the trial itself, e.g. divergence; a trial cut short
by an interruption does not count; a resumed sampler restarts from its seed, so a resumed search samples
differently from an uninterrupted one). Any SQLAlchemy URL can be given instead, and ``journal:<path>``
selects Optuna's JournalStorage, the safer choice when many processes on one node share a study
(SQLite locks under concurrent writers). Several workers may share one study; each keeps asking until
the shared budget is reached, so the total can overshoot by at most (workers - 1) x parallel trials.

The driver asks ``parallel_trials`` trials at once (constant-liar TPE treats the pending ones as
running), hands them to an engine that trains them (one after another, or stacked in one model), and
tells Optuna each outcome.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, Trial, TrialState
from sqlalchemy import event
from tqdm.auto import tqdm

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo.spaces import distributions

#: User attribute holding the reason a trial failed by itself (counts toward the budget).
FAILURE_ATTR = "failure"
#: User attribute naming the process that runs a trial (``host:pid``), to fail trials of dead workers.
WORKER_ATTR = "worker"


class SearchFailed(RuntimeError):
    """No trial of a study completed, so there is no winner (the job fails with this reason)."""


@dataclass(frozen=True)
class SearchSettings:
    """The Optuna budget of a neural regime: one settings object shared by the MLP probe and finetuning.

    Given in YAML as one nested block, ``init_args: {search: {n_trials: 12, parallel_trials: 4}}``; what is
    left out keeps its default. ``None`` for ``max_epochs`` or ``parallel_trials`` means the regime's
    published value (25 / 1 for the MLP probe, 15 / 8 for finetuning), see :meth:`resolved`.

    Args:
        n_trials: Finished trials per study (48 published).
        n_startup_trials: Random trials before TPE (8).
        max_epochs: Hyperband max resource and epoch budget (25 MLP, 15 finetune).
        min_resource: Hyperband min resource in epochs (1).
        reduction_factor: Hyperband reduction factor (3).
        parallel_trials: Trials asked from TPE together (constant liar) and trained together as one stacked
            model (1 MLP, 8 finetune published).
        storage: Optuna storage: ``None`` (SQLite in the job folder), an SQLAlchemy URL or
            ``journal:<path>``; may contain ``{job_id}``, ``{repeat}``, ``{work_dir}``. Not a result setting
            (and it may hold credentials), so it stays out of the run identity.

    """

    n_trials: int = 48
    n_startup_trials: int = 8
    max_epochs: int | None = None
    min_resource: int = 1
    reduction_factor: int = 3
    parallel_trials: int | None = None
    storage: str | None = None

    def resolved(self, max_epochs: int, parallel_trials: int) -> SearchSettings:
        """These settings with a regime's defaults filled in, validated.

        Raises:
            ConfigError: A count below 1 (or negative start-up trials).

        """
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
    """What an engine reports for one trial it trained.

    Attributes:
        state: ``complete``, ``pruned`` or ``failed``.
        value: Best validation selection score over the epochs run (complete trials).
        best_epoch: 1-based epoch that reached it (the number of epochs to train to reproduce it).
        epochs_run: Epochs actually trained.
        failure: Why a failed trial failed.
        weights: State dict at the best epoch (complete trials), for the weight store.

    """

    state: Literal["complete", "pruned", "failed"]
    value: float | None = None
    best_epoch: int | None = None
    epochs_run: int = 0
    failure: str | None = None
    weights: dict[str, Any] | None = field(default=None, repr=False)


def storage_url(template: str | None, work_dir: Path, job_id: str, repeat: int) -> str:
    """The storage of one study: SQLite in ``work_dir/repeat<r>/`` by default, else the template filled in.

    Args:
        template: ``None``, an SQLAlchemy URL or ``journal:<path>``; may contain ``{job_id}``,
            ``{repeat}`` and ``{work_dir}``.
        work_dir: The job's persistent folder.
        job_id: The job id.
        repeat: Repeat index (0-2).

    """
    if template is None:
        path = Path(work_dir) / f"repeat{repeat}" / "optuna.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path.resolve()}"
    return template.format(job_id=job_id, repeat=repeat, work_dir=str(work_dir))


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


def open_study(storage: BaseStorage, name: str, settings: SearchSettings, seed: int) -> optuna.Study:
    """Create the study, or load it with a fresh sampler (seed r) and pruner when it exists."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # inner searches run by the hundred
    return optuna.create_study(storage=storage, study_name=name, direction="maximize", load_if_exists=True,
                               sampler=settings.sampler(seed), pruner=settings.pruner())


def counts_toward_budget(trial: FrozenTrial) -> bool:
    """Complete, pruned, or failed by itself (divergence); not cut short by an interruption."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and FAILURE_ATTR in trial.user_attrs


def n_finished(study: optuna.Study) -> int:
    """Trials that count toward the budget."""
    return sum(counts_toward_budget(t) for t in study.get_trials(deepcopy=False))


def worker_id() -> str:
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fail_orphaned_trials(study: optuna.Study) -> list[int]:
    """Mark running trials of dead processes on this host (and of this process) failed; returns their numbers.

    A killed process leaves its trials RUNNING forever; a constant-liar sampler would keep treating them as
    pending. Trials of live workers, or of other hosts, are left alone.
    """
    host, _, _ = worker_id().partition(":")
    orphans = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = str(trial.user_attrs.get(WORKER_ATTR, ""))
        owner_host, _, pid = owner.partition(":")
        if owner_host == host and pid.isdigit() and (int(pid) == os.getpid() or not _alive(int(pid))):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            orphans.append(trial.number)
    return orphans


BatchRunner = Callable[[list[Trial]], list[TrialOutcome]]


def run_search(study: optuna.Study, settings: SearchSettings, space: Mapping[str, Sequence[Any]],
               run_batch: BatchRunner,
               on_complete: Callable[[Trial, TrialOutcome], None] | None = None) -> None:
    """Ask, train and tell until ``settings.n_trials`` trials have finished.

    Args:
        study: The (possibly resumed) study.
        settings: Budget and batch size.
        space: Categorical values per parameter; every trial's parameters are sampled when it is asked.
        run_batch: Trains the asked trials (reporting per-epoch values and pruning itself) and returns
            one outcome per trial.
        on_complete: Called for each complete trial before it is told (e.g. to store its weights).

    """
    fail_orphaned_trials(study)
    dists = distributions(space)
    # A nested bar under the runner's job bar, on a terminal only (a log file would get one line per trial).
    bar = tqdm(total=settings.n_trials, initial=n_finished(study), desc="trials", unit="trial", leave=False,
               disable=not sys.stderr.isatty(), file=sys.stderr, position=1)
    try:
        _ask_train_tell(study, settings, dists, run_batch, on_complete, bar)
    finally:
        bar.close()


def _ask_train_tell(study: optuna.Study, settings: SearchSettings, dists: Mapping[str, Any],
                    run_batch: BatchRunner,
                    on_complete: Callable[[Trial, TrialOutcome], None] | None, bar: tqdm) -> None:
    while (done := n_finished(study)) < settings.n_trials:
        batch = min(settings.batch, settings.n_trials - done)
        trials = [study.ask(fixed_distributions=dict(dists)) for _ in range(batch)]
        for trial in trials:
            trial.set_user_attr(WORKER_ATTR, worker_id())
        try:
            live = mirror_trials(study, trials)
            outcomes = run_batch(live)
            for trial, outcome in zip(trials, outcomes, strict=True):
                if outcome.state == "complete" and on_complete is not None:
                    on_complete(trial, outcome)
        except BaseException:
            for trial in trials:  # interrupted: fail them without the failure attr, so they don't count
                study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        for trial, mirrored, outcome in zip(trials, live, outcomes, strict=True):
            persist_reports(study, trial, mirrored, outcome_attrs(outcome))
            tell(study, trial, outcome, attrs_stored=True)
        bar.update(n_finished(study) - bar.n)


def mirror_trials(study: optuna.Study, trials: Sequence[Trial]) -> list[Trial]:
    """In-memory twins of just-asked trials, inside an in-memory copy of the whole study.

    Engines report every epoch and ask whether to prune; on an RDB that is a few transactions and a
    re-read of every trial per epoch and trial. The twins answer from memory instead: the copy has the
    same name, trial numbers and pruner, so Hyperband assigns the same brackets and sees the same rungs
    (trials of the same batch included). :func:`persist_reports` writes a twin's reports to the stored
    trial when it ends, so an interrupted search still resumes per finished trial.
    """
    memory = optuna.create_study(storage=optuna.storages.InMemoryStorage(), study_name=study.study_name,
                                 direction="maximize", pruner=study.pruner,
                                 sampler=optuna.samplers.RandomSampler(seed=0))
    storage, study_id = memory._storage, memory._study_id
    stored = study.get_trials(deepcopy=False)
    if [t.number for t in stored] != list(range(len(stored))):
        raise RuntimeError(f"study {study.study_name}: trial numbers are not contiguous")
    for frozen in stored:
        storage.create_new_trial(study_id, template_trial=frozen)
    ids = [storage.get_trial_id_from_study_id_trial_number(study_id, t.number) for t in trials]
    return [Trial(memory, trial_id) for trial_id in ids]


def persist_reports(study: optuna.Study, trial: Trial, mirrored: Trial,
                    user_attrs: Mapping[str, Any] | None = None) -> None:
    """Copy a twin's per-epoch values, pruner bookkeeping and ``user_attrs`` to the stored trial.

    On an RDB this is one transaction per trial instead of one per epoch and attribute.
    """
    frozen = mirrored.study._storage.get_trial(mirrored._trial_id)
    storage, trial_id = study._storage, trial._trial_id
    known = storage.get_trial(trial_id).system_attrs
    system = {k: v for k, v in frozen.system_attrs.items() if known.get(k) != v}
    values = sorted(frozen.intermediate_values.items())
    attrs = dict(user_attrs or {})
    # a study wraps its RDBStorage in Optuna's cache, which passes writes of running trials straight on
    rdb = getattr(storage, "_backend", storage)
    if isinstance(rdb, RDBStorage):
        try:
            from optuna.storages._rdb import models
            from optuna.storages._rdb.storage import _create_scoped_session
        except ImportError:  # pragma: no cover - another Optuna layout: one transaction per value below
            pass
        else:
            with _create_scoped_session(rdb.scoped_session, True) as session:
                for step, value in values:
                    rdb._set_trial_intermediate_value_without_commit(session, trial_id, step, value)
                for model, items in ((models.TrialSystemAttributeModel, system),
                                     (models.TrialUserAttributeModel, attrs)):
                    for key, value in items.items():
                        rdb._set_trial_attr_without_commit(session, model, trial_id, key, value)
            return
    for step, value in values:
        storage.set_trial_intermediate_value(trial_id, step, value)
    for key, value in system.items():
        storage.set_trial_system_attr(trial_id, key, value)
    for key, value in attrs.items():
        storage.set_trial_user_attr(trial_id, key, value)


def outcome_attrs(outcome: TrialOutcome) -> dict[str, Any]:
    """The user attributes an outcome leaves on its trial."""
    attrs: dict[str, Any] = {"epochs_run": outcome.epochs_run}
    if outcome.best_epoch is not None:
        attrs["best_epoch"] = outcome.best_epoch
    if outcome.state == "failed":
        attrs[FAILURE_ATTR] = outcome.failure or "failed"
    return attrs


def tell(study: optuna.Study, trial: Trial, outcome: TrialOutcome, attrs_stored: bool = False) -> None:
    """Record an outcome: user attributes first (unless already stored), then the final state."""
    if not attrs_stored:
        for key, value in outcome_attrs(outcome).items():
            trial.set_user_attr(key, value)
    if outcome.state == "complete":
        assert outcome.value is not None and math.isfinite(outcome.value)
        study.tell(trial, outcome.value)
    elif outcome.state == "pruned":
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, state=TrialState.FAIL)


def best_trial(study: optuna.Study) -> FrozenTrial:
    """The best complete trial by its best-epoch score; the lowest number wins ties.

    Raises:
        SearchFailed: No trial completed; the message gives the failure reasons seen.

    """
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
