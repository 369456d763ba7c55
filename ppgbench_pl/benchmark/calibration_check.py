"""A stored calibration file, read as untrusted input: every field checked, one line naming the first bad one.

The file is the user's to edit or copy between machines, and the dry run multiplies its coefficients
into every estimate, so a value that is not a finite, non-negative measurement (a negative intercept,
NaN, a JSON list instead of an object, an encoder entry without ``name``) is refused, never printed as
``about -2.2e+07 s`` or ``nan days``. Coefficients and the start-up cost are bounded by :data:`MAX_SECONDS`
and throughputs from below by :data:`MIN_THROUGHPUT`, so no estimate built from a valid file overflows.
No torch here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import ConfigError

#: Largest coefficient, start-up cost or calibration time a file may hold (seconds, or seconds per unit).
MAX_SECONDS = 1e6
#: Smallest throughput (windows per second) a file may hold: any estimate from it stays finite.
MIN_THROUGHPUT = 1e-3
_TOP = {"machine": str, "calibrated": bool, "created": str, "threads": int, "device": str, "coefficients": dict,
        "encoders": dict, "seconds": float, "startup_s": float, "thread_factor": float}
_ENCODER = {"name": str, "inference_per_s": float, "training_per_s": float, "embed_dim": int, "device": str,
            "training": str}


class BadField(ValueError):
    """A calibration field that is missing or holds the wrong kind of value."""


def _number(value: Any, field: str, low: float, high: float, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise BadField(f"{field} is {json.dumps(value)[:40]}, not {'an integer' if integer else 'a number'}")
    if not math.isfinite(value) or not low <= value <= high:
        raise BadField(f"{field} is {value!r}, outside [{low:g}, {high:g}]")
    return value


def _check(value: Any, field: str, kind: type, low: float = 0.0, high: float = MAX_SECONDS) -> Any:
    if kind is float:
        return float(_number(value, field, low, high))
    if kind is int:
        return int(_number(value, field, max(low, 1), high, integer=True))
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise BadField(f"{field} is {json.dumps(value)[:40]}, not a {kind.__name__}")
    return value


def model_fields(raw: Any, kinds: tuple[str, ...]) -> dict[str, Any]:
    """The :class:`~ppgbench_pl.benchmark.cost_model.CostModel` fields of a parsed file (``format`` removed).

    Raises:
        BadField: Naming the first field that is missing, unknown, or not a valid measurement.
    """
    if not isinstance(raw, dict):
        raise BadField(f"the file holds a JSON {type(raw).__name__}, not an object")
    unknown = sorted(set(raw) - set(_TOP))
    if unknown:
        raise BadField(f"{unknown[0]} is not a calibration field")
    out = {k: _check(v, k, _TOP[k], high=1024 if k == "threads" else MAX_SECONDS) for k, v in raw.items()}
    if "machine" not in out:
        raise BadField("machine is missing")
    if out.get("device", "cpu") not in ("cpu", "cuda"):
        raise BadField(f"device is {out['device']!r}, not cpu or cuda")
    coefficients = {}
    for kind, pair in out.get("coefficients", {}).items():
        if kind not in kinds:
            raise BadField(f"coefficients.{kind} is not a kind of the cost model ({', '.join(kinds)})")
        if not isinstance(pair, list) or len(pair) != 2:
            raise BadField(f"coefficients.{kind} is {json.dumps(pair)[:40]}, not [intercept, slope]")
        coefficients[kind] = (_check(pair[0], f"coefficients.{kind}[0] (intercept)", float),
                              _check(pair[1], f"coefficients.{kind}[1] (slope)", float))
    if "coefficients" in out:
        out["coefficients"] = coefficients
    for key, entry in out.get("encoders", {}).items():
        where = f"encoders.{key}"
        if not isinstance(entry, dict):
            raise BadField(f"{where} is {json.dumps(entry)[:40]}, not an object")
        missing = sorted(set(_ENCODER) - set(entry))
        if missing:
            raise BadField(f"{where}.{missing[0]} is missing")
        for name, value in entry.items():
            if name in _ENCODER:
                high = 1e12 if name != "embed_dim" else 1e7
                _check(value, f"{where}.{name}", _ENCODER[name], low=MIN_THROUGHPUT if "_per_s" in name else 0.0,
                       high=high)
    return out


def parse_calibration(path: Path, kinds: tuple[str, ...], version: int) -> dict[str, Any] | None:
    """The checked fields of the calibration at ``path``; None when it is of another format (measured again).

    Raises:
        ConfigError: One line naming the file and the field, and how to measure again.
    """
    redo = "run `ppgbench calibrate --force` to measure again"
    try:
        raw = json.loads(path.read_text(), parse_constant=str)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable calibration ({type(exc).__name__}); {redo}") from None
    if isinstance(raw, dict) and raw.get("format") != version:
        return None
    try:
        fields = dict(raw) if isinstance(raw, dict) else raw
        if isinstance(fields, dict):
            fields.pop("format")
        return model_fields(fields, kinds)
    except BadField as exc:
        raise ConfigError(f"{path}: not a valid calibration: {exc}; {redo}") from None
