"""The arguments of :func:`ppgbench_pl.evaluate`: types checked in one line each, then made ``fit`` entries."""

from __future__ import annotations

import inspect
import numbers
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.messages import did_you_mean
from ppgbench_pl.naming import snake_case

#: Run options of ``ppgbench fit`` that ``evaluate`` takes as keyword overrides, and what each takes (the defaults
#: are the parser's; ``optuna_storage`` is checked by its own rule).
RUN_OPTIONS: dict[str, Any] = {
    "wandb": Literal["group", "per-job", "off", True, False], "wandb_project": str,
    "ci_unit": Literal["seed", "fold"], "progress": bool, "allow_code_change": bool, "max_cache_gb": float,
    "optuna_storage": Any, "cache_dir": str | Path | None, "cache_size_gb": float | None,
    "lock_timeout": float | None, "dry_run": bool, "threads": int | None,
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
                          "entry dicts or Regime instances")  # each is checked by regime_entry
    check_value("output_dir", str | Path, output_dir)
    from ppgbench_pl.datamodules.ppg import PPGDataModule

    data = typing.get_type_hints(PPGDataModule.__init__)
    for key, value in overrides.items():
        hint = RUN_OPTIONS.get(key, data.get(key))
        if hint is not None:
            check_value(key, hint, value)
    return task_list, regime_list, control_list


# -- config entries -----------------------------------------------------------------------------------------
EncoderLike = Any  # a registered name, a class_path (str or entry dict), a PPGEncoder or an nn.Module
RegimeLike = Any  # a regime name, (name, init_args), a class_path entry dict, or a Regime instance


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def encoder_entry(encoder: EncoderLike, *, sampling_rate: float | None = None, name: str | None = None,
                  encoder_args: Mapping[str, Any] | None = None) -> Any:
    """Return the entry of an encoder given as :func:`~ppgbench_pl.evaluate` takes it (a built object as it is)."""
    args = dict(encoder_args or {})
    if name is not None:
        args["name"] = name
    if isinstance(encoder, str | Mapping | type):
        if sampling_rate is not None:
            args["sampling_rate"] = sampling_rate
        if isinstance(encoder, type):
            path = _class_path(encoder)
        else:
            path = str(encoder["class_path"] if isinstance(encoder, Mapping) else encoder)
            if "." not in path:
                from ppgbench_pl.encoders import ENCODERS

                path = _class_path(ENCODERS[path])  # ConfigError with the known names when unknown
        init = {**dict(encoder.get("init_args") or {}), **args} if isinstance(encoder, Mapping) else args
        return {"class_path": path, "init_args": init} if init else {"class_path": path}
    from torch import nn

    from ppgbench_pl.encoders.base import PPGEncoder

    if isinstance(encoder, PPGEncoder):
        if args or sampling_rate is not None:
            raise ConfigError(f"encoder {encoder.name!r} is already built: set name, sampling_rate and other "
                              "settings when you construct it (or pass its class or name instead)")
        return encoder
    if isinstance(encoder, nn.Module):
        from ppgbench_pl.encoders.custom import CustomEncoder

        if sampling_rate is None:
            raise ConfigError(f"a plain nn.Module ({type(encoder).__name__}) needs sampling_rate=<Hz>: the "
                              "rate it was trained at (every dataset is resampled to it)")
        args.setdefault("name", snake_case(type(encoder).__name__))  # TinyPPGCNN -> tiny_ppg_cnn
        if not {"checkpoint", "random_init"} & set(args):
            args["weights_in_module"] = True  # the weights are the ones the module holds in memory now
        return CustomEncoder(encoder, sampling_rate=sampling_rate, **args)
    raise ConfigError(f"cannot evaluate a {type(encoder).__name__}: give a registered encoder name, a class "
                      "path, a PPGEncoder or an nn.Module with sampling_rate")


def regime_entry(regime: RegimeLike) -> Any:
    """Return the ``trainer.callbacks`` entry of a name, ``(name, init_args)``, an entry dict or a Regime instance."""
    if isinstance(regime, str):
        return {"class_path": _regime_class(regime)}
    if isinstance(regime, tuple):
        if len(regime) != 2 or not isinstance(regime[0], str) or not isinstance(regime[1], Mapping | None):
            raise ConfigError(f"regimes: {regime!r}: a pair must be (name, init_args dict), e.g. "
                              "('mlp', {'search': {'n_trials': 4}})")
        return {"class_path": _regime_class(regime[0]), "init_args": dict(regime[1] or {})}
    if isinstance(regime, Mapping):
        if "class_path" not in regime:
            raise ConfigError(f"regimes: {dict(regime)!r}: an entry dict needs a class_path")
        entry: dict[str, Any] = {"class_path": _regime_class(str(regime["class_path"]))}
        if regime.get("init_args"):
            entry["init_args"] = dict(regime["init_args"])
        return entry
    from ppgbench_pl.regimes.base import Regime

    if isinstance(regime, Regime):
        return regime
    raise ConfigError(f"regimes: {regime!r}: not a regime (a name such as 'linear', a (name, init_args) pair, an "
                      "entry dict or a Regime instance)")


def _regime_class(name: str) -> str:
    if "." in name:
        return name
    from ppgbench_pl.regimes.catalog import REGIMES

    if name not in REGIMES:
        raise ConfigError(f"unknown regime '{name}'{did_you_mean(name, REGIMES)} (regimes: {', '.join(REGIMES)})")
    return REGIMES[name].class_path


def executor_entry(executor: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the executor entry of ``None``/``local``, ``process``, ``submitit``, ``dask`` or an entry."""
    from ppgbench_pl.commands import EXECUTOR_ALIASES

    if executor is None or isinstance(executor, str):
        return {"class_path": EXECUTOR_ALIASES.get(executor or "local", executor)}
    if isinstance(executor, Mapping):
        path = str(executor["class_path"])
        args = dict(executor.get("init_args") or {})
        return {"class_path": EXECUTOR_ALIASES.get(path, path), "init_args": args}
    raise ConfigError(f"executor: give local, process, submitit, dask or a class_path entry, not a "
                      f"{type(executor).__name__}")


def split_overrides(overrides: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Keyword overrides -> (run options, data init_args, trainer settings); an unknown key is one line."""
    import lightning as L

    from ppgbench_pl.datamodules.ppg import PPGDataModule

    data_keys = [p for p in inspect.signature(PPGDataModule.__init__).parameters
                 if p not in ("self", "dataset", "tasks", "seeds", "folds")]
    trainer_keys = [p for p in inspect.signature(L.Trainer.__init__).parameters
                    if p not in ("self", "callbacks")]
    run, data, trainer = {}, {}, {}
    for key, value in overrides.items():
        if key in RUN_OPTIONS:
            run[key] = value
        elif key in data_keys:
            data[key] = value
        elif key in trainer_keys:
            trainer[key] = value
        else:
            hint = did_you_mean(key, [*RUN_OPTIONS, *data_keys, *trainer_keys])
            raise ConfigError(f"evaluate() got an unknown option '{key}'{hint} (run options: "
                              f"{', '.join(RUN_OPTIONS)}; data: {', '.join(data_keys)}; or a Trainer "
                              "setting)")
    return run, data, trainer
