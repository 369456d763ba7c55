"""JSON text from someone else, parsed within bounds: size, nesting depth, duplicate keys, numbers.

Python's :mod:`json` reads any size into memory, ends deep nesting in a ``RecursionError``, keeps the last
of two equal keys without a word and reads ``NaN``, ``Infinity`` and ``1e999`` as non-finite floats. Here
the size is checked before reading, the depth before parsing (a bracket count outside strings, in NumPy),
and the parser refuses a duplicate key, a non-finite number and an integer of more than 20 digits, each as
a one-line ``ValueError`` (the caller names the file).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

#: Deepest nesting accepted: an exported file is about 9 levels deep (records -> results -> search ->
#: trials -> values); a bound far below the interpreter's recursion limit.
MAX_DEPTH = 32
#: Longest integer literal (a seed or a count has at most 20 digits; longer is a payload, not a number).
MAX_INT_DIGITS = 20
#: A JSON string (escapes included): removed before brackets are counted.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class _Refused(ValueError):
    """A value the bounded parser refuses (raised from its hooks)."""


def read_bytes_bounded(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, refused (``ValueError``) before reading when it is larger than ``max_bytes``.

    Raises:
        OSError: The file cannot be read.
        ValueError: It is larger than the bound (one line with its size and the bound).

    """
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"is {size / 2**20:.1f} MiB, more than the {max_bytes / 2**20:.0f} MiB a results file "
                         "may be")
    with path.open("rb") as handle:
        data = handle.read(size + 1)  # a buffer of the size stat saw (the file may have grown since)
    if len(data) > size:
        raise ValueError("grew while it was read; read it again once it is written")
    return data


def nesting_depth(data: bytes, chunk: int = 1 << 16) -> int:
    """The deepest bracket nesting of JSON text, strings left out (no parsing, no recursion; memory per chunk)."""
    import numpy as np

    brackets = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    deepest = depth = 0
    for start in range(0, len(brackets), chunk):
        part = brackets[start:start + chunk]
        step = ((part == ord("[")) | (part == ord("{"))).view(np.int8) - ((part == ord("]")) | (part == ord("}")))
        running = np.cumsum(step, dtype=np.int32) + depth
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
    return deepest


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key[:80]!r} in one JSON object (which value is meant?)")
        out[key] = value
    return out


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} is not finite")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _constant(text: str) -> Any:
    raise _Refused(f"{text} is not JSON (a non-finite number)")


def loads_bounded(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text within the bounds of the module docstring.

    Raises:
        ValueError: Not UTF-8, too deeply nested, not valid JSON, a duplicate key or a non-finite or
            overlong number (one line saying which).

    """
    depth = nesting_depth(data)
    if depth > max_depth:
        raise ValueError(f"nests {depth} levels deep, more than the {max_depth} a results file may")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("is not valid JSON (not UTF-8 text)") from None
    try:
        return json.loads(text, object_pairs_hook=_object, parse_float=_float, parse_int=_int,
                          parse_constant=_constant)
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:  # not reached: the depth was bounded above
        raise ValueError("nests too deeply to parse") from None
