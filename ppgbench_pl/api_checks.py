"""Types of the arguments of :func:`ppgbench_pl.evaluate`, checked before anything is read or built.

Each wrong type is refused in one line naming the argument, the value and what it takes, instead of a
``TypeError`` from deep inside the engine (``regimes=5``, ``synthetic_subjects="8"``) or a silent
misreading (``progress="no"`` is truthy). Data-module settings are checked against the annotations of
:class:`~ppgbench_pl.datamodules.PPGDataModule`, so a new setting is covered without listing it here.
"""

from __future__ import annotations

import numbers
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from ppgbench_pl.errors import ConfigError

#: Run options of ``ppgbench fit`` that ``evaluate`` takes as keyword overrides (and their defaults).
RUN_OPTIONS: dict[str, Any] = {
    "wandb": "group", "wandb_project": "ppgbench", "ci_unit": "seed", "progress": True,
    "allow_code_change": False, "max_cache_gb": 50.0, "optuna_storage": None, "cache_dir": None, "cache_size_gb": None,
    "lock_timeout": None, "dry_run": False, "threads": None,
}
#: The run options of ``evaluate`` and what each takes (``optuna_storage`` is checked by its own rule).
RUN_TYPES: dict[str, Any] = {
    "wandb": Literal["group", "per-job", "off", True, False], "wandb_project": str,
    "ci_unit": Literal["seed", "fold"], "progress": bool, "allow_code_change": bool, "max_cache_gb": float,
    "cache_dir": str | Path | None, "cache_size_gb": float | None, "lock_timeout": float | None,
    "dry_run": bool, "threads": int | None,
}


def accepts(hint: Any, value: Any) -> bool | None:
    """Whether ``value`` fits a simple annotation (None: too complex to tell, left to the engine)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        verdicts = [accepts(arg, value) for arg in typing.get_args(hint)]
        return True if True in verdicts else (False if all(v is False for v in verdicts) else None)
    if origin is Literal:
        return any(value is choice or (type(value) is type(choice) and value == choice)
                   for choice in typing.get_args(hint))
    simple = {type(None): value is None, bool: isinstance(value, bool), str: isinstance(value, str),
              int: isinstance(value, numbers.Integral) and not isinstance(value, bool),
              float: isinstance(value, numbers.Real) and not isinstance(value, bool),
              Path: isinstance(value, Path)}
    return simple.get(hint)


def describe(hint: Any) -> str:
    """What an annotation takes, in words (``an int or None``, ``one of 'seed', 'fold'``)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe(arg) for arg in typing.get_args(hint)))
    if origin is Literal:
        return "one of " + ", ".join(repr(choice) for choice in typing.get_args(hint))
    words = {type(None): "None", bool: "True or False", str: "a str", int: "an int", float: "a number",
             Path: "a Path"}
    return words.get(hint, getattr(hint, "__name__", str(hint)))


def _choices(hint: Any) -> list[Any]:
    """Every Literal choice an annotation (or a union of them) lists."""
    if typing.get_origin(hint) is Literal:
        return list(typing.get_args(hint))
    return [c for arg in typing.get_args(hint) for c in _choices(arg)]


def check_value(name: str, hint: Any, value: Any) -> None:
    """Refuse ``value`` for ``name`` in one line when it does not fit ``hint`` (a Path passes for a str)."""
    if isinstance(value, Path) and accepts(hint, str(value)):
        return
    if accepts(hint, value) is False:
        wrong_kind = all(type(choice) is not type(value) for choice in _choices(hint))
        kind = f", not a {type(value).__name__}" if wrong_kind else ""
        raise ConfigError(f"{name}={value!r}: must be {describe(hint)}{kind}")


def _check_regimes(regimes: Any) -> None:
    if isinstance(regimes, str) or (isinstance(regimes, tuple) and len(regimes) == 2 and isinstance(regimes[0], str)
                                    and isinstance(regimes[1], Mapping)):
        regimes = [regimes]  # one regime given alone (as build_config reads it)
    if not isinstance(regimes, Iterable) or isinstance(regimes, Mapping | bytes):
        raise ConfigError(f"regimes={regimes!r}: must be a list of regime names, (name, init_args) pairs, entry "
                          f"dicts or Regime instances, not a {type(regimes).__name__}")
    for regime in regimes:
        if isinstance(regime, tuple) and (len(regime) != 2 or not isinstance(regime[0], str)
                                          or not isinstance(regime[1], Mapping | None)):
            raise ConfigError(f"regimes: {regime!r}: a pair must be (name, init_args dict), e.g. "
                              "('mlp', {'search': {'n_trials': 4}})")
        if isinstance(regime, Mapping) and "class_path" not in regime:
            raise ConfigError(f"regimes: {dict(regime)!r}: an entry dict needs a class_path")
        if isinstance(regime, int | float | bool | bytes | list | set) or regime is None:
            raise ConfigError(f"regimes: {regime!r}: not a regime (a name such as 'linear', a (name, init_args) "
                              f"pair, an entry dict or a Regime instance)")


def check_arguments(dataset: Any, tasks: Any, regimes: Any, controls: Any, output_dir: Any,
                    overrides: Mapping[str, Any]) -> None:
    """Refuse an ``evaluate`` argument of the wrong type, in one line naming it (nothing is read yet)."""
    check_value("dataset", str, dataset)
    if tasks is not None and not isinstance(tasks, str):
        if not isinstance(tasks, Iterable) or isinstance(tasks, Mapping):
            raise ConfigError(f"tasks={tasks!r}: must be a list of task names, not a {type(tasks).__name__}")
        for task in tasks:
            check_value("tasks", str, task)
    if not isinstance(controls, str) and (not isinstance(controls, Iterable) or isinstance(controls, Mapping)):
        raise ConfigError(f"controls={controls!r}: must be a list of encoders (names, class paths or objects), "
                          f"not a {type(controls).__name__}")
    _check_regimes(regimes)
    check_value("output_dir", str | Path, output_dir)
    data = _data_hints()
    for key, value in overrides.items():
        hint = RUN_TYPES.get(key, data.get(key))
        if hint is not None:
            check_value(key, hint, value)


def _data_hints() -> dict[str, Any]:
    """The annotations of the data module's settings (evaluated; empty where they cannot be)."""
    from ppgbench_pl.datamodules.ppg import PPGDataModule

    try:
        return typing.get_type_hints(PPGDataModule.__init__)
    except (NameError, TypeError):
        return {}
