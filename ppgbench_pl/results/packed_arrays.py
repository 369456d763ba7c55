"""Prediction arrays inside an exported results file: each ``.npz`` array as a small, exact JSON object.

An exported file (:mod:`ppgbench_pl.results.export`, format version 2) carries every prediction file of
its jobs, array for array, so the report's rescoring table (Table 4) and ``Results.predictions`` work from
the file as from the run folder. One array is packed as (schema: ``docs/schema/ppgbench-results.schema.json``,
``$defs/array``):

* numbers and booleans: ``{"dtype": "<f8", "shape": [120, 3], "zlib_base64": "..."}``: the array's bytes
  in C order, little-endian, zlib-compressed, then base64 (exact: the values read back are bit-identical);
* text (subject names, string labels): ``{"dtype": "<U3", "shape": [120], "runs": [["s01", 12], ...]}``:
  the values in C order, run-length encoded (a subject's windows are consecutive, so this is short).

Nothing else is packed (no object or bytes arrays: the benchmark writes none). :func:`unpack` checks every
field and says what is wrong in one line (``ValueError``), so a damaged file never yields wrong arrays.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

NUMERIC = re.compile(r"^[<|][biuf][1248]$")
TEXT = re.compile(r"^<U[0-9]+$")


def pack(array: np.ndarray) -> dict[str, Any]:
    """One array as its JSON object (module docstring).

    Raises:
        ValueError: An array that is neither numbers, booleans nor text.

    """
    array = np.asarray(array)
    if array.dtype.kind in "biuf":
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        data = zlib.compress(np.ascontiguousarray(little).tobytes(), 9)
        return {"dtype": little.dtype.str, "shape": list(array.shape),
                "zlib_base64": base64.b64encode(data).decode("ascii")}
    if array.dtype.kind == "U":
        runs: list[list[Any]] = []
        for value in array.ravel().tolist():
            if runs and runs[-1][0] == value:
                runs[-1][1] += 1
            else:
                runs.append([value, 1])
        return {"dtype": array.dtype.newbyteorder("<").str, "shape": list(array.shape), "runs": runs}
    raise ValueError(f"an array of dtype {array.dtype} cannot be exported (numbers, booleans or text only)")


def pack_all(arrays: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Every array of one prediction file, by name."""
    return {str(name): pack(value) for name, value in arrays.items()}


def _shape(packed: Mapping[str, Any]) -> tuple[int, ...]:
    shape = packed.get("shape")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                              for n in shape):
        raise ValueError("'shape' must be a list of non-negative integers")
    return tuple(shape)


def unpack(packed: Any) -> np.ndarray:
    """The array a :func:`pack` object holds.

    Raises:
        ValueError: The object is malformed or its data do not fill its shape (one line saying which).

    """
    if not isinstance(packed, Mapping) or not isinstance(packed.get("dtype"), str):
        raise ValueError("a packed array must be an object with 'dtype', 'shape' and its data")
    dtype, shape = packed["dtype"], _shape(packed)
    size = math.prod(shape)
    if NUMERIC.match(dtype):
        try:
            data = zlib.decompress(base64.b64decode(str(packed.get("zlib_base64", "")), validate=True))
        except (binascii.Error, zlib.error) as exc:
            raise ValueError(f"'zlib_base64' does not decode ({exc})") from None
        if len(data) != size * np.dtype(dtype).itemsize:
            raise ValueError(f"'zlib_base64' holds {len(data)} bytes, not the {size} x {dtype} of shape {list(shape)}")
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    if TEXT.match(dtype):
        runs = packed.get("runs")
        if not isinstance(runs, list) or not all(
                isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and isinstance(r[1], int)
                and not isinstance(r[1], bool) and r[1] > 0 for r in runs):
            raise ValueError("'runs' must be a list of [text, positive count] pairs")
        if sum(r[1] for r in runs) != size:
            raise ValueError(f"'runs' count {sum(r[1] for r in runs)} values, not the {size} of shape {list(shape)}")
        values = [value for value, count in runs for _ in range(count)]
        return np.array(values, dtype=dtype).reshape(shape)
    raise ValueError(f"dtype {dtype!r} is not one an exported file holds (<i8, <f8, |b1, <U3, ...)")


def unpack_all(packed: Any) -> dict[str, np.ndarray]:
    """Every array of one packed prediction file (``ValueError`` naming the array that is malformed)."""
    if not isinstance(packed, Mapping):
        raise ValueError("a packed prediction file must be an object of arrays")
    out = {}
    for name, value in packed.items():
        try:
            out[str(name)] = unpack(value)
        except ValueError as exc:
            raise ValueError(f"array '{name}': {exc}") from None
    return out
