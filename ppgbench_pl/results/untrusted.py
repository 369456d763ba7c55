"""The one reader of results files others send (``ppgbench report``, ``leaderboard``, ``pb.load_run``).

One-line refusals, in order: size, nesting depth, JSON (no duplicate keys, non-finite or overlong numbers),
``format`` and its version, that version's JSON Schema, then :mod:`~ppgbench_pl.results.plausible`.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import DataError

FORMAT = "ppgbench.results"
FORMAT_VERSION = 2
#: Versions this ppgbench reads (1: no ``predictions``).
READABLE_VERSIONS = (1, 2)
#: Largest file read; ``PPGBENCH_MAX_RESULTS_MB`` raises it for a file you trust.
MAX_FILE_BYTES = 256 << 20
#: Deepest nesting accepted (an export is about 9 levels deep), far below the recursion limit.
MAX_DEPTH = 32
#: Longest integer literal (a seed or a count has at most 20 digits).
MAX_INT_DIGITS = 20
#: A JSON string (escapes included): removed before brackets are counted.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class _Refused(ValueError):
    """A value the bounded parser refuses (raised from its hooks)."""


def max_file_bytes() -> int:
    """:data:`MAX_FILE_BYTES`, or ``PPGBENCH_MAX_RESULTS_MB`` megabytes when set."""
    text = os.environ.get("PPGBENCH_MAX_RESULTS_MB", "").strip()
    if not text:
        return MAX_FILE_BYTES
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise DataError(f"PPGBENCH_MAX_RESULTS_MB={text!r}: give a size in MB (e.g. 1024)")
    return int(value * 2**20)


def read_bytes_bounded(path: Path, max_bytes: int) -> bytes:
    """The file's bytes; ``ValueError`` before reading when it is larger than ``max_bytes`` (``OSError`` passes)."""
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


def loads_bounded(data: bytes) -> Any:
    """Parse JSON text within bounds; ``ValueError`` (one line) for bad UTF-8, depth, syntax, keys or numbers."""
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:  # so the parser never recurses deeply
        raise ValueError(f"nests {depth} levels deep, more than the {MAX_DEPTH} a results file may")
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


def read_results_file(path: str | Path) -> dict[str, Any]:
    """An exported results file, validated (module docstring); ``DataError`` (one line) when unreadable or refused."""
    from ppgbench_pl.results import schemas
    from ppgbench_pl.results.plausible import first_problem

    path = Path(path)
    try:
        data = read_bytes_bounded(path, max_file_bytes())
        document = loads_bounded(data)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise DataError(f"{path}: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DataError(f"{path}: not a ppgbench results file (expected \"format\": \"{FORMAT}\"; "
                        "make one with ppgbench export RUN)")
    version = document.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise DataError(f"{path}: format_version {str(version)[:20]} is not one this ppgbench reads (1 to "
                        f"{FORMAT_VERSION}); upgrade ppgbench")
    schema = schemas.EXPORT if version == 2 else schemas.EXPORT_V1
    if problem := schemas.first_error(document, schema) or first_problem(document, len(data)):
        raise DataError(f"{path}: field {problem}")
    return document
