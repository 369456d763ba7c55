"""Config entries (``class_path`` + ``init_args``): import the class, build the object, read its name.

The suite spec (:mod:`ppgbench_pl.benchmark.spec`) checks entries and the suite
(:mod:`ppgbench_pl.benchmark.suite`) builds them; both use these helpers, so neither imports the other's
module for them.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from typing import Any

from jsonargparse import ArgumentError, ArgumentParser

from ppgbench_pl.benchmark.plan import EncoderInfo
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import Regime

#: Objects built in this process and handed to the engine by the Python API (:mod:`ppgbench_pl.api`): a
#: spec entry ``{"class_path": ..., "instance": key}`` stands for ``PREBUILT[key]``. Only an executor that
#: runs jobs in this process can use them (the API refuses the others).
PREBUILT: dict[str, Any] = {}


def prebuilt(entry: dict[str, Any]) -> Any:
    """Return the pre-built object of an ``instance`` entry (an encoder as is, a regime copied), else None."""
    key = entry.get("instance") if isinstance(entry, dict) else None
    if key is None:
        return None
    obj = PREBUILT.get(str(key))
    if obj is None:
        raise ConfigError(f"{entry.get('class_path')}: a pre-built object ({key}) is not in this process; "
                          "objects handed to ppgbench_pl.evaluate run only with the local executor")
    return obj if isinstance(obj, PPGEncoder) else copy.deepcopy(obj)


def instantiate(base: type, entry: dict[str, Any]) -> Any:
    """Build one ``class_path``/``init_args`` entry as jsonargparse would (nested classes included)."""
    obj = prebuilt(entry)
    if obj is not None:
        return obj
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--obj", type=base)
    try:
        return parser.instantiate(parser.parse_object({"obj": copy.deepcopy(entry)})).obj
    except ArgumentError as exc:  # one line naming the entry and the bad setting, not argparse's nesting
        raise ConfigError(entry_error(base, entry, str(exc))) from None


def entry_error(base: type, entry: dict[str, Any], message: str) -> str:
    """``regime linear (class path): 'nonsense' is not one of its settings (accepted: ...)``."""
    from ppgbench_pl.messages import did_you_mean, one_line

    kind = "regime" if base is Regime else "encoder" if base is PPGEncoder else base.__name__
    path = str(entry.get("class_path")) if isinstance(entry, dict) else repr(entry)
    try:
        cls = import_class(path)
    except (ImportError, AttributeError, ValueError):
        return f"{kind} {path}: {one_line(message).removeprefix('obj: ')}"
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    where = f"{kind} {getattr(cls, 'name', cls.__name__)} ({path})"
    given = (entry.get("init_args") or {}) if isinstance(entry, dict) else {}
    unknown = [key for key in given if key not in accepted] if isinstance(given, dict) else []
    if unknown:
        return (f"{where}: '{unknown[0]}' is not one of its settings (accepted: {', '.join(accepted) or 'none'})"
                f"{did_you_mean(unknown[0], accepted)}")
    return f"{where}: {one_line(message).removeprefix('obj: ').removeprefix('obj.')}"


def import_class(path: str) -> Any:
    """The class a fully qualified ``class_path`` names."""
    module, _, attr = str(path).rpartition(".")
    return getattr(importlib.import_module(module), attr)


def encoder_info(entry: dict[str, Any]) -> EncoderInfo:
    """Name, rate and trainability of an encoder entry, read from its class and init_args (not built)."""
    if (obj := prebuilt(entry)) is not None:
        return EncoderInfo(str(obj.name), float(obj.sampling_rate), bool(getattr(obj, "trainable", True)))
    cls = import_class(entry["class_path"])
    args = entry.get("init_args") or {}
    name = cls.config_name(args) if hasattr(cls, "config_name") else str(args.get("name", cls.name))
    return EncoderInfo(str(name), float(args.get("sampling_rate", cls.sampling_rate)),
                       bool(getattr(cls, "trainable", True)))


def regime_name(entry: dict[str, Any]) -> str:
    """The name a regime entry will have (regimes are cheap to build)."""
    return str(instantiate(Regime, entry).name)
