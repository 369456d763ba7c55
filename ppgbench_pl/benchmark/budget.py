"""Budgets: how much of the protocol a run spends, one stackable YAML file each (``configs/budget/``).

``ppgbench fit --config my_model.yaml --config configs/budget/smoke.yaml`` runs the same engine on a
small budget: the budget file's ``data.init_args`` narrows seeds, folds, subjects and windows per subject
(real :class:`~ppgbench_pl.datamodules.PPGDataModule` options, any dataset), and its ``budget`` block
caps what a stacked file cannot reach inside the regime list: the searched regimes' trials, epochs and
holdout repeats. ``configs/budget/published.yaml`` restores the published protocol.

The budget's name is part of the run identity (``run.json``; absent for ``published``, so folders made
before budgets existed resume) and of every record, summary row, report table and W&B run, so a smoke
number can never land in, or be read as, a published-protocol folder. Capping the data under the
``published`` name is refused.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any

from ppgbench_pl.errors import ConfigError

PUBLISHED = "published"
#: Caps of the ``budget`` block and the search setting each one bounds.
SEARCH_CAPS = ("n_trials", "n_startup_trials", "max_epochs")
#: Datamodule options that cap the data (set by a budget file's ``data.init_args``).
DATA_CAPS = ("max_subjects", "max_windows_per_subject")


@dataclass
class Budget:
    """The ``budget`` block of a fit/benchmark config.

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


def budget_of(config: dict[str, Any]) -> Budget:
    """The config's budget (``published`` when it has none), validated."""
    raw = config.get("budget") or {}
    if isinstance(raw, Budget):
        raw = asdict(raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"budget: expected a mapping (name, n_trials, ...), got {raw!r}")
    unknown = sorted(set(raw) - set(Budget.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"budget.{unknown[0]}: not a budget setting (name, {', '.join(SEARCH_CAPS)}, "
                          "subject_repeats, standardize_targets)")
    budget = Budget(**raw)
    budget.name = str(budget.name or PUBLISHED)
    if budget.standardize_targets is not None and not isinstance(budget.standardize_targets, bool):
        raise ConfigError(f"budget.standardize_targets={budget.standardize_targets!r}: must be true or false")
    for key in (*SEARCH_CAPS, "subject_repeats"):
        value, least = getattr(budget, key), 0 if key == "n_startup_trials" else 1
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ConfigError(f"budget.{key}={value!r}: must be a whole number >= {least}")
    return budget


def _capped_search(search: Any, budget: Budget) -> dict[str, Any]:
    search = dict(search.get("init_args", search)) if isinstance(search, dict) else {}
    for key in SEARCH_CAPS:
        cap = getattr(budget, key)
        if cap is not None:
            current = search.get(key)
            search[key] = cap if current is None else min(int(current), cap)
    if search.get("n_startup_trials") is not None and search.get("n_trials") is not None:
        search["n_startup_trials"] = min(search["n_startup_trials"], search["n_trials"])
    return search


def apply_budget(spec: dict[str, Any], budget: Budget) -> dict[str, Any]:
    """The spec with the budget's caps applied to its regimes and its name recorded (``spec["budget"]``).

    Raises:
        ConfigError: The data is capped (``max_subjects``, ``max_windows_per_subject``) under the
            ``published`` name, or the budget caps the search under that name.
    """
    import inspect

    from ppgbench_pl.benchmark.entries import import_class

    capped = [f"data.init_args.{k}={spec['data'][k]}" for k in DATA_CAPS if spec["data"].get(k) is not None]
    capped += [f"budget.{k}={getattr(budget, k)}" for k in (*SEARCH_CAPS, "subject_repeats")
               if getattr(budget, k) is not None]
    if budget.standardize_targets is not None:
        capped.append(f"budget.standardize_targets={budget.standardize_targets}")
    if budget.name == PUBLISHED and capped:
        raise ConfigError(f"{capped[0]}: the published budget runs the whole protocol; stack "
                          "configs/budget/smoke.yaml (or set budget.name to another label) to run a capped budget")
    out = dict(spec)
    regimes = []
    for entry in spec["regimes"]:
        entry = copy.deepcopy(entry)
        if "instance" not in entry:
            params = inspect.signature(import_class(entry["class_path"])).parameters
            args = entry.setdefault("init_args", {})
            if "search" in params and any(getattr(budget, k) is not None for k in SEARCH_CAPS):
                args["search"] = _capped_search(args.get("search"), budget)
            if "subject_repeats" in params and budget.subject_repeats is not None:
                args["subject_repeats"] = budget.subject_repeats
            if "standardize_targets" in params and budget.standardize_targets is not None:
                args["standardize_targets"] = budget.standardize_targets
        regimes.append(entry)
    out["regimes"], out["budget"] = regimes, budget.name
    return out


#: Regime settings that belong to the search budget (a deviation in one makes the budget ``custom``).
BUDGET_SETTINGS = ("search.", "subject_repeats")
CUSTOM = "custom"


def budget_label(name: str | None, deviations: list[str]) -> str:
    """The budget a job ran under, as its record, summary row and W&B tags say it.

    ``published`` only when every setting of the published budget holds: a regime whose search or holdout
    repeats were changed in its own settings (``("mlp", {"search": {"n_trials": 4}})``) ran a ``custom``
    budget, whatever the budget block is called; a named budget (``smoke``) keeps its name.
    """
    name = name or PUBLISHED
    if name == PUBLISHED and any(d.startswith(BUDGET_SETTINGS) for d in deviations):
        return CUSTOM
    return name


def describe_budget(spec: dict[str, Any]) -> str:
    """One line for the dry run: which budget, and what it caps."""
    name = spec.get("budget") or PUBLISHED
    caps = [f"{k} {spec['data'][k]}" for k in DATA_CAPS if (spec.get("data") or {}).get(k) is not None]
    for entry in spec.get("regimes") or []:
        search = (entry.get("init_args") or {}).get("search")
        if isinstance(search, dict) and search.get("n_trials") is not None:
            caps.append(f"{entry['class_path'].rsplit('.', 1)[-1]} {search['n_trials']} trials x "
                        f"{search.get('max_epochs') or 'default'} epochs")
    if name == PUBLISHED:
        return "budget: published (the whole protocol)" + (f"; {', '.join(caps)}" if caps else "")
    return f"budget: {name} ({', '.join(caps) or 'no caps'}); NOT the published protocol: results are marked {name}"
