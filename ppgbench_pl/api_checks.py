"""Types of the arguments of :func:`ppgbench_pl.evaluate`, checked before anything is read or built.

The config parser would raise deep inside the engine or exit the process (``regimes=5``), or misread silently
(``progress="no"``, ``output_dir=5``); here each is one ``ConfigError`` naming the argument. Data-module
settings are checked against :class:`~ppgbench_pl.datamodules.PPGDataModule`'s annotations.
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
_WORDS = {type(None): "None", bool: "True or False", str: "a str", int: "an int", float: "a number", Path: "a Path"}


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
    return _WORDS.get(hint, getattr(hint, "__name__", str(hint)))


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


def _listed(name: str, value: Any, what: str) -> list[Any]:
    """``value`` as a list (one str given alone is a list of one); anything else but an iterable is refused."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Iterable) or isinstance(value, Mapping | bytes):
        raise ConfigError(f"{name}={value!r}: must be a list of {what}, not a {type(value).__name__}")
    return list(value)


def _check_regime(regime: Any) -> None:
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
                    overrides: Mapping[str, Any]) -> tuple[list[str] | None, list[Any], list[Any]]:
    """Refuse an ``evaluate`` argument of the wrong type in one line; return tasks, regimes, controls as lists."""
    check_value("dataset", str, dataset)
    task_list = None if tasks is None else _listed("tasks", tasks, "task names")
    for task in task_list or []:
        check_value("tasks", str, task)
    control_list = _listed("controls", controls, "encoders (names, class paths or objects)")
    alone = isinstance(regimes, tuple) and len(regimes) == 2 and isinstance(regimes[0], str) \
        and isinstance(regimes[1], Mapping)
    regime_list = _listed("regimes", [regimes] if alone else regimes, "regime names, (name, init_args) pairs, "
                          "entry dicts or Regime instances")
    for regime in regime_list:
        _check_regime(regime)
    check_value("output_dir", str | Path, output_dir)
    from ppgbench_pl.datamodules.ppg import PPGDataModule

    try:
        data = typing.get_type_hints(PPGDataModule.__init__)
    except (NameError, TypeError):  # an annotation that cannot be evaluated: the parser judges those settings
        data = {}
    for key, value in overrides.items():
        hint = RUN_TYPES.get(key, data.get(key))
        if hint is not None:
            check_value(key, hint, value)
    return task_list, regime_list, control_list
