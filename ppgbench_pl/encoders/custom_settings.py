"""The settings of a user's model in :class:`~ppgbench_pl.encoders.custom.CustomEncoder`, checked and resolved.

The ``preprocess`` callable's import path, the native sampling rate, the literal choices (for direct Python
callers; jsonargparse checks YAML), and the digest of the user's code that keys cached embeddings.
"""

from __future__ import annotations

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
    """Import ``"pkg.module:function"`` or ``"pkg.module.function"``.

    Raises:
        ConfigError: The module cannot be imported, lacks the attribute, or it is not callable.
    """
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
    """Hash of the source code of classes/functions, so editing a user's model invalidates cached embeddings.

    Objects without retrievable source (built-ins, C extensions) contribute their qualified name only.
    """
    digest = hashlib.sha256()
    for obj in objects:
        digest.update(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}".encode())
        try:
            digest.update(inspect.getsource(obj).encode())  # type: ignore[arg-type]
        except (OSError, TypeError):
            pass
    return digest.hexdigest()


def check_own_name(name: str) -> None:
    """Refuse a name that ppgbench already gives a meaning (a catalog encoder, ``prv``, the baseline).

    The model would take that entry's card, overlap flags and control role.

    Raises:
        ConfigError: The name is taken (the message says by what).
    """
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
    """Validate a native rate in Hz: finite and within [MIN_SAMPLING_RATE, MAX_SAMPLING_RATE].

    Raises:
        ConfigError: Not a number, not finite, or outside the range (the message says why).

    """
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
    """Literal types are checked by jsonargparse, but direct Python callers get the same message."""
    if value not in choices:
        raise ConfigError(f"{option} must be one of {', '.join(choices)}; got '{value}'")
