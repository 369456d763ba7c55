"""Python objects given to :func:`ppgbench_pl.evaluate` as the entries of a ``ppgbench fit`` config.

A name, class path or entry dict becomes a ``class_path`` entry; a built object goes in as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppgbench_pl.api_run import LOCAL_EXECUTOR
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.messages import did_you_mean
from ppgbench_pl.naming import snake_case

EncoderLike = Any  # a registered name, a class_path (str or entry dict), a PPGEncoder or an nn.Module
RegimeLike = Any  # a regime name, (name, init_args), a class_path entry dict, or a Regime instance


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def encoder_entry(encoder: EncoderLike, *, sampling_rate: float | None = None, name: str | None = None,
                  encoder_args: Mapping[str, Any] | None = None) -> Any:
    """Return the ``class_path``/``init_args`` entry of an encoder in any form (a built object as it is).

    Args:
        encoder: A registered name (``ppgbench list encoders``), a dotted class path, an entry dict, a
            :class:`~ppgbench_pl.encoders.base.PPGEncoder` class or instance, or any ``nn.Module``
            (wrapped by :class:`~ppgbench_pl.encoders.custom.CustomEncoder`, which needs ``sampling_rate``).
        sampling_rate: Native rate in Hz (required for a plain ``nn.Module``; else an init argument).
        name: Name in job ids and tables (an init argument; for a module, default: its class name).
        encoder_args: More init arguments (``random_init=True``, ``checkpoint=...``; for a module the
            :class:`CustomEncoder` settings: ``pooling``, ``input_shape``, ``normalize``, ...).

    Raises:
        ConfigError: An unknown name, a module without ``sampling_rate``, or arguments given to an
            object that is already built.

    """
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
            path = path if "." in path else _encoder_class(path)
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


def _encoder_class(name: str) -> str:
    from ppgbench_pl.encoders import ENCODERS

    return _class_path(ENCODERS[name])  # ConfigError with the known names when unknown


def regime_entry(regime: RegimeLike) -> Any:
    """Return the ``trainer.callbacks`` entry of a name, ``(name, init_args)``, an entry dict or a Regime instance.

    Raises:
        ConfigError: An unknown regime name (with the known ones).

    """
    if isinstance(regime, str):
        return {"class_path": _regime_class(regime)}
    if isinstance(regime, tuple) and len(regime) == 2 and isinstance(regime[0], str):
        return {"class_path": _regime_class(regime[0]), "init_args": dict(regime[1] or {})}
    if isinstance(regime, Mapping):
        entry: dict[str, Any] = {"class_path": _regime_class(str(regime["class_path"]))}
        if regime.get("init_args"):
            entry["init_args"] = dict(regime["init_args"])
        return entry
    from ppgbench_pl.regimes.base import Regime

    if isinstance(regime, Regime):
        return regime
    raise ConfigError(f"cannot run a {type(regime).__name__} as a regime: give a name "
                      "(linear, rf, mlp, finetune), (name, init_args), a class_path entry or a Regime")


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

    if executor is None:
        return {"class_path": LOCAL_EXECUTOR}
    if isinstance(executor, str):
        return {"class_path": EXECUTOR_ALIASES.get(executor, executor)}
    if isinstance(executor, Mapping):
        path = str(executor["class_path"])
        args = dict(executor.get("init_args") or {})
        return {"class_path": EXECUTOR_ALIASES.get(path, path), "init_args": args}
    raise ConfigError(f"executor: give local, process, submitit, dask or a class_path entry, not a "
                      f"{type(executor).__name__}")
