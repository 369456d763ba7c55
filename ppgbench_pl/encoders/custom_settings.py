"""The checks of :class:`~ppgbench_pl.encoders.custom.CustomEncoder`'s settings, its code digest and its output."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import math
from collections.abc import Callable
from typing import Any

from torch import Tensor

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.limits import MAX_SAMPLING_RATE, MIN_SAMPLING_RATE  # native rates a PPG model can have

PreprocessFn = Callable[[Tensor, float], Any]


def resolve_callable(path: str) -> PreprocessFn:
    """Import ``"pkg.module:function"`` or ``"pkg.module.function"`` (ConfigError when that fails)."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"preprocess '{path}': expected 'package.module:function' or "
                          "'package.module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"preprocess '{path}': cannot import '{module_name}' ({exc})") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"preprocess '{path}': '{module_name}' has no attribute '{attr}'")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"preprocess '{path}': {attr} is not callable")
    return target  # type: ignore[no-any-return]


def code_digest(*objects: object) -> str:
    """Hash of the source of classes/functions (else their name), so editing a user's model invalidates the cache."""
    digest = hashlib.sha256()
    for obj in objects:
        digest.update(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}".encode())
        with contextlib.suppress(OSError, TypeError):
            digest.update(inspect.getsource(obj).encode())  # type: ignore[arg-type]
    return digest.hexdigest()


def check_own_name(name: str) -> None:
    """Refuse (ConfigError) a name ppgbench already gives a meaning: its card, flags and role would be the model's."""
    from ppgbench_pl.encoders.catalog import CATALOG
    from ppgbench_pl.naming import is_baseline

    if name == "prv" or (name in CATALOG and name != "custom"):
        owner = f"ppgbench's own '{name}' encoder"
    elif is_baseline(name):
        owner = "the constant baseline"
    else:
        return
    raise ConfigError(f"name {name!r} is taken by {owner} (its card, overlap flags and role would become your "
                      "model's); give your model its own name")


def check_sampling_rate(value: object) -> float:
    """Validate a native rate in Hz: finite and within [MIN_SAMPLING_RATE, MAX_SAMPLING_RATE] (else ConfigError)."""
    try:
        fs = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"sampling_rate must be a number of Hz, got {value!r}") from None
    if not math.isfinite(fs) or fs <= 0:
        raise ConfigError(f"sampling_rate must be a finite positive number of Hz, got {value!r}")
    if fs < MIN_SAMPLING_RATE:
        raise ConfigError(f"sampling_rate {fs:g} Hz is too low for PPG: the pulse (up to ~4 Hz at 240 bpm) "
                          f"is not resolved below {MIN_SAMPLING_RATE:g} Hz; give your model's native rate")
    if fs > MAX_SAMPLING_RATE:
        raise ConfigError(f"sampling_rate {fs:g} Hz is above {MAX_SAMPLING_RATE:g} Hz: PPG holds nothing "
                          "there, and every window (and the embedding cache) grows with the rate; give your "
                          "model's native rate")
    return fs


def check_choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    """A Literal setting, checked for direct Python callers too (jsonargparse checks YAML)."""
    if value not in choices:
        raise ConfigError(f"{option} must be one of {', '.join(choices)}; got '{value}'")


def reduce_output(out: Any, pooling: str, batch: int) -> Tensor:
    """Reduce a module's output to ``[batch, D]``: element 0 of a tuple/list, then ``pooling`` (else ValueError)."""
    if isinstance(out, (tuple, list)):
        if not out:
            raise ValueError(f"the module returned an empty {type(out).__name__}")
        out = out[0]
    if not isinstance(out, Tensor):
        raise ValueError(f"the module returned {type(out).__name__}, expected a tensor or a tuple")
    if pooling != "none":
        if out.ndim != 3:
            raise ValueError(f"pooling: {pooling} expects a [B, C, T] output, the module returned "
                             f"{list(out.shape)}")
        out = out.mean(dim=-1) if pooling == "mean" else out.amax(dim=-1)
    if out.ndim != 2 or out.shape[0] != batch:
        raise ValueError(f"expected embeddings [B, D] for a batch of {batch}, the module returned "
                         f"{list(out.shape)}")
    return out


def shape_hint(input_shape: str) -> str:
    """What to change when a module refuses the input shape it was given."""
    other = "BT" if input_shape == "BCT" else "BCT"
    return f"input_shape: {input_shape}; a module that wants {'[B, T]' if other == 'BT' else '[B, 1, T]'} " \
           f"needs input_shape: {other}, a [B, C, T] output needs pooling: mean or max"


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception from a user's module as one short line."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
