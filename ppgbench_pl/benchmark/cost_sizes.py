"""The sizes an estimate rests on: each task's (read or assumed), each embedding's, and what a search trains.

Without the processed tree a task's size comes from the dataset's declared participants and
:data:`WINDOWS_PER_SUBJECT` (the publisher's release at the protocol's windowing), under the budget's data caps.
A search's epochs follow Optuna's Hyperband as it behaves here, in expectation: brackets and their trial shares
as Optuna allots them; a trial checked at 0-based step ``s`` has trained ``s + 1`` epochs; the ``i``-th trial
to reach a rung is promoted when in the top ``floor(i / eta)`` there, or the best while fewer than ``eta`` have
arrived. Measured on synthetic (48 trials, at most 25 epochs): 8.1 and 8.5 epochs per trial; this gives 7.9.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppgbench_pl.benchmark.cost_model import DEFAULT_EMBED_DIM, CostModel, encoder_key
from ppgbench_pl.errors import PPGBenchError

#: Approximate windows per subject of each published release (PROTOCOL.md 1), from the datasets' own
#: descriptions (BIDMC 8-minute records in 10 s windows, DaLiA ~2.5 h at a 2 s stride, DREAMT a night...), and
#: the subjects where the declaration states none. Rough orders of magnitude, printed as assumed.
WINDOWS_PER_SUBJECT: dict[str, int] = {
    "bidmc": 48, "ppgbp": 3, "dalia": 4300, "dreamt": 2800, "wesad": 600, "butppg": 80, "ecsmp": 250,
    "realworldppg": 30, "wildppg": 5000,
}
ASSUMED_SUBJECTS: dict[str, int] = {"butppg": 50, "ecsmp": 89, "realworldppg": 35, "wildppg": 16}
#: Argument names that state an encoder's (or a wrapped module's) output size.
DIM_NAMES = ("embed_dim", "embedding_dim", "out_dim", "output_dim", "out_features")
#: Below this many validation subjects a subject-level score takes so few values that trials tie at the top
#: and Hyperband promotes nearly all of them: synthetic stiffness (5 validation subjects, the published MLP
#: search) trained 38 of 48 trials all 25 epochs, 22.1 epochs per trial against 7.9 for distinct scores.
FEW_VALIDATION_SUBJECTS = 10
TIED_COMPLETE = 0.87  # share of the trials of such a search that train every epoch (the others stop early)
HOLDOUT_SHARE = 0.2  # of the outer-training groups, held out for a neural regime's validation (PROTOCOL.md 3.3)


@dataclass(frozen=True)
class TaskSize:
    """Labelled windows, groups and classes of one task at one rate, and where the figures come from."""

    rows: int
    groups: int
    classes: int
    windows: int  # every window of the dataset at that rate (what the embedding pass reads)
    source: str


def task_size(dm: Any, fs: float, task: Any, read_tree: bool = True) -> TaskSize:
    """The task's size from the processed tree when it can be read (and ``read_tree``), else as published."""
    if read_tree:
        try:
            import numpy as np

            view = dm.task_view(fs, task)
            classes = len(task.classes) or (len(np.unique(view.y)) if task.kind == "classification" else 1)
            return TaskSize(len(view.rows), len(np.unique(view.groups)), int(classes), len(dm.windows(fs).x),
                            "processed tree")
        except PPGBenchError:
            pass
    if dm.dataset == "synthetic":
        subjects, per_subject = dm.synthetic.n_subjects, dm.synthetic.windows_per_subject
        source = "the synthetic settings"
    else:
        subjects = dm.info.subjects or ASSUMED_SUBJECTS.get(dm.dataset, 20)
        per_subject = WINDOWS_PER_SUBJECT.get(dm.dataset, 500)
        source = f"assumed: no processed tree, ~{per_subject} windows x {subjects} subjects (published release)"
    if dm.max_subjects is not None:
        subjects = min(subjects, dm.max_subjects)
    if dm.max_windows_per_subject is not None:
        per_subject = min(per_subject, dm.max_windows_per_subject)
    classes = len(task.classes) or (subjects if task.kind == "classification" else 1)
    return TaskSize(subjects * per_subject, subjects, max(int(classes), 1), subjects * per_subject, source)


def embed_dim(entry: dict[str, Any], model: CostModel) -> tuple[int, str]:
    """(embedding size, where it comes from): measured, the encoder catalog, the config, the class, or assumed."""
    measured = model.encoders.get(encoder_key(entry))
    if measured and measured.get("embed_dim"):
        return int(measured["embed_dim"]), "measured"
    from ppgbench_pl.encoders.catalog import CATALOG

    for known in CATALOG.values():
        if known.class_path == entry.get("class_path") and known.embedding_dim:
            return int(known.embedding_dim), "catalog"
    found = declared_dim(entry) or declared_dim((entry.get("init_args") or {}).get("module"))
    return found if found else (DEFAULT_EMBED_DIM, "assumed")


def declared_dim(entry: Any) -> tuple[int, str] | None:
    """The size a ``class_path``/``init_args`` entry states: in its config, else as its class's default."""
    if not isinstance(entry, dict) or not entry.get("class_path"):
        return None
    args = entry.get("init_args") or {}
    for name in DIM_NAMES:
        if isinstance(args.get(name), int):
            return int(args[name]), "config"
    try:
        from ppgbench_pl.naming import import_class

        params = inspect.signature(import_class(str(entry["class_path"])).__init__).parameters
    except Exception:  # noqa: BLE001 - a class the dry run cannot import: the size is assumed, and says so
        return None
    for name in DIM_NAMES:
        if name in params and isinstance(params[name].default, int):
            return int(params[name].default), f"{name} default of {entry['class_path'].rsplit('.', 1)[-1]}"
    return None


def epochs_distribution(n_trials: int, max_epochs: int, min_resource: int = 1,
                        reduction_factor: int = 3) -> dict[int, float]:
    """Probability that a trial of an ``n_trials`` search trains each number of epochs (module docstring)."""
    eta, top = max(int(reduction_factor), 2), max(int(max_epochs), 1)
    low, n_trials = max(int(min_resource), 1), max(int(n_trials), 1)
    if top <= low:
        return {top: 1.0}
    brackets = math.floor(math.log(top / low, eta)) + 1
    weights = [math.ceil(brackets * eta ** (brackets - 1 - b) / (brackets - b)) for b in range(brackets)]
    out: dict[int, float] = {}
    for b, weight in enumerate(weights):
        share = n_trials * weight / sum(weights)
        rungs = [low * eta ** (b + k) for k in range(brackets) if low * eta ** (b + k) < top]
        arrived = [0.0] * len(rungs)
        for part in [1.0] * int(share) + ([share - int(share)] if share > int(share) else []):
            reach = 1.0
            for k, step in enumerate(rungs):
                arrived[k] += reach * part
                there = max(arrived[k], 1.0)
                promoted = max(math.floor(there) // eta, 1) / there
                epochs = min(step + 1, top)
                out[epochs] = out.get(epochs, 0.0) + part * reach * (1 - promoted) / n_trials
                reach *= promoted
            out[top] = out.get(top, 0.0) + part * reach / n_trials
    return out


def hyperband_epochs(max_epochs: int, min_resource: int = 1, reduction_factor: int = 3, n_trials: int = 48) -> float:
    """Mean epochs a trial of an ``n_trials`` search trains (:func:`epochs_distribution`)."""
    dist = epochs_distribution(n_trials, max_epochs, min_resource, reduction_factor)
    return sum(e * p for e, p in dist.items())


@dataclass(frozen=True)
class SearchWork:
    """What one group of jobs searched in one stack trains: studies are jobs x repeats; trial-epochs in all."""

    jobs: int
    studies: int
    trials: int
    trial_epochs: float


def search_work(n_trials: int, max_epochs: int, min_resource: int, reduction_factor: int, studies_per_job: int,
                jobs: int, tied: bool = False) -> SearchWork:
    """The :class:`SearchWork` of ``jobs`` jobs of ``studies_per_job`` studies each, searched in one stack.

    ``tied``: the scores tie at the top (:data:`FEW_VALIDATION_SUBJECTS`): :data:`TIED_COMPLETE` of the trials
    train every epoch, the others stop at the first check; else Hyperband's :func:`hyperband_epochs`.
    """
    first = min(max(int(min_resource), 1) + 1, int(max_epochs))
    if tied and first < max_epochs:
        mean = max_epochs * TIED_COMPLETE + first * (1 - TIED_COMPLETE)
    else:
        mean = float(max_epochs) if tied else hyperband_epochs(max_epochs, min_resource, reduction_factor, n_trials)
    studies = max(int(studies_per_job), 1) * max(int(jobs), 1)
    return SearchWork(max(int(jobs), 1), studies, studies * n_trials, studies * n_trials * mean)


def few_validation_subjects(task: object, groups: int, n_folds: int) -> bool:
    """Whether a subject-level task's holdout has fewer than :data:`FEW_VALIDATION_SUBJECTS` subjects."""
    held = groups * (n_folds - 1) / max(n_folds, 1) * HOLDOUT_SHARE
    return getattr(task, "level", "window") == "subject" and held < FEW_VALIDATION_SUBJECTS


def regime_search_work(regime: Any, task: object, jobs: int, tied: bool = False) -> SearchWork:
    """:func:`search_work` of a neural regime's settings on a task (holdout and search repeats counted)."""
    from ppgbench_pl.regimes.search_seeds import searches_per_job

    s = regime.search
    holdouts = int(regime.subject_repeats) if getattr(task, "level", "window") == "subject" else 1
    return search_work(int(s.n_trials), int(s.epochs), int(s.min_resource), int(s.reduction_factor),
                       holdouts * searches_per_job(regime), jobs, tied)


def stack_groups(pending: Sequence[Any]) -> dict[str, int]:
    """Job id -> jobs in its stack group, grouped by the runner's own :func:`.groups.job_groups`."""
    from ppgbench_pl.benchmark.groups import job_groups

    return {jid: len(group) for group in job_groups(pending) for jid in group}
