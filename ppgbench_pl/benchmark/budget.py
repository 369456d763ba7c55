"""Budgets (``configs/budget/``): data and search caps, named in the run identity and every record."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ppgbench_pl.errors import ConfigError

PUBLISHED = "published"
#: Caps of the ``budget`` block and the search setting each one bounds.
SEARCH_CAPS = ("n_trials", "n_startup_trials", "max_epochs")
#: Datamodule options that cap the data (set by a budget file's ``data.init_args``).
DATA_CAPS = ("max_subjects", "max_windows_per_subject")


@dataclass
class Budget:
    """The ``budget`` block of a fit/benchmark config (validated here, once).

    Args:
        name: ``published`` (the protocol), ``smoke`` or any other label; recorded everywhere.
        n_trials: At most this many Optuna trials per study of a searched regime (mlp, finetune).
        n_startup_trials: At most this many random start-up trials before TPE.
        max_epochs: At most this many epochs per trial (the Hyperband max resource).
        subject_repeats: Holdout repeats on subject-level tasks (published 3).
        standardize_targets: Train the searched regimes' regression heads on z-scored targets. A search of
            a few short trials cannot find the learning rate that raw targets (bpm, years) need, where the
            published 48-trial search does; the smoke budget sets it, so its errors resemble the full run's.
    """

    name: str = PUBLISHED
    n_trials: int | None = None
    n_startup_trials: int | None = None
    max_epochs: int | None = None
    subject_repeats: int | None = None
    standardize_targets: bool | None = None

    def __post_init__(self) -> None:
        self.name = str(self.name or PUBLISHED)
        if self.standardize_targets is not None and not isinstance(self.standardize_targets, bool):
            raise ConfigError(f"budget.standardize_targets={self.standardize_targets!r}: must be true or false")
        for key in (*SEARCH_CAPS, "subject_repeats"):
            value, least = getattr(self, key), 0 if key == "n_startup_trials" else 1
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise ConfigError(f"budget.{key}={value!r}: must be a whole number >= {least}")


def _searched(regime: Any) -> bool:
    """Whether a regime runs an Optuna search (no regime can, unless its settings' module is imported already)."""
    module = sys.modules.get("ppgbench_pl.hpo.optuna_search")
    return module is not None and isinstance(getattr(regime, "search", None), module.SearchSettings)


def capped_search(search: Any, budget: Budget) -> Any:
    """A resolved ``SearchSettings`` capped by the budget (not imported here: only a searching run imports Optuna)."""
    caps = {k: min(getattr(search, k), getattr(budget, k)) for k in SEARCH_CAPS if getattr(budget, k) is not None}
    capped = replace(search, **caps)
    capped = replace(capped, n_startup_trials=min(capped.n_startup_trials, capped.n_trials))
    return capped.resolved(search.epochs, search.batch)


def apply_budget(regimes: Sequence[Any], budget: Budget, datamodules: Sequence[Any],
                 storage: str | None = None) -> None:
    """Cap the built regimes' searches and repeats by the budget (``storage``: ``--optuna_storage`` where none)."""
    capped = list(dict.fromkeys(f"data.init_args.{k}={getattr(dm, k)}" for dm in datamodules for k in DATA_CAPS
                                if getattr(dm, k, None) is not None))
    capped += [f"budget.{k}={getattr(budget, k)}" for k in (*SEARCH_CAPS, "subject_repeats", "standardize_targets")
               if getattr(budget, k) is not None]
    if budget.name == PUBLISHED and capped:
        raise ConfigError(f"{capped[0]}: the published budget runs the whole protocol; stack "
                          "configs/budget/smoke.yaml (or set budget.name to another label) to run a capped budget")
    for regime in regimes:
        if _searched(regime) and any(getattr(budget, k) is not None for k in SEARCH_CAPS):
            regime.search = capped_search(regime.search, budget)
        for key in ("subject_repeats", "standardize_targets"):
            if getattr(budget, key) is not None and hasattr(regime, key):
                setattr(regime, key, getattr(budget, key))
        if storage is not None and _searched(regime) and regime.search.storage is None:
            regime.search = replace(regime.search, storage=storage)


#: Regime settings that belong to the search budget (a deviation in one makes the budget ``custom``).
BUDGET_SETTINGS = ("search.", "subject_repeats")
CUSTOM = "custom"


def budget_label(name: str | None, deviations: list[str]) -> str:
    """The budget a job ran under: ``custom`` for ``published`` with a regime's own search or repeats changed."""
    name = name or PUBLISHED
    if name == PUBLISHED and any(d.startswith(BUDGET_SETTINGS) for d in deviations):
        return CUSTOM
    return name


def describe_budget(suite: Any) -> str:
    """One line for the dry run: which budget, and what it caps."""
    name = suite.budget.name
    caps = list(dict.fromkeys(f"{k} {getattr(dm, k)}" for dm in suite.datamodules.values() for k in DATA_CAPS
                              if getattr(dm, k, None) is not None))
    for regime in suite.regimes:
        capped = suite.budget.n_trials is not None or any(d.startswith("search.n_trials") for d in regime.deviations())
        if _searched(regime) and capped:
            caps.append(f"{type(regime).__name__} {regime.search.n_trials} trials x {regime.search.max_epochs} epochs")
    if name == PUBLISHED:
        return "budget: published (the whole protocol)" + (f"; {', '.join(caps)}" if caps else "")
    return f"budget: {name} ({', '.join(caps) or 'no caps'}); NOT the published protocol: results are marked {name}"
