"""Prediction arrays inside an exported results file: each ``.npz`` array as a small, exact JSON object.

An exported file (:mod:`ppgbench_pl.results.export`, format version 2) carries every prediction file of
its jobs, array for array, so the report's rescoring table (Table 4) and ``Results.predictions`` work from
the file as from the run folder. One array is packed as (schema:
``ppgbench_pl/schema/ppgbench-results.schema.json``, documented in ``docs/schema/README.md``,
``$defs/array``):

* numbers and booleans: ``{"dtype": "<f8", "shape": [120, 3], "zlib_base64": "..."}``: the array's bytes
  in C order, little-endian, zlib-compressed, then base64 (exact: the values read back are bit-identical);
* text (subject names, string labels): ``{"dtype": "<U3", "shape": [120], "runs": [["s01", 12], ...]}``:
  the values in C order, run-length encoded (a subject's windows are consecutive, so this is short).

Nothing else is packed (no object or bytes arrays: the benchmark writes none). :func:`unpack` checks every
field and says what is wrong in one line (``ValueError``), so a damaged file never yields wrong arrays;
the declared size is checked before anything is decoded (:func:`declared`, :func:`check_siblings`), zlib
data inflate in chunks up to one byte past it, and text runs are expanded by NumPy to the declared length.
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
TEXT = re.compile(r"^<U[0-9]{1,6}$")
#: The most bytes one unpacked array may take (about 16 million windows of float64 class scores x 4); the
#: reader of a whole file also bounds the sum by the file's size (:mod:`ppgbench_pl.results.untrusted`).
MAX_ARRAY_BYTES = 1 << 29


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


def declared(packed: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape an object declares, checked without decoding its data (text runs are summed).

    Raises:
        ValueError: Malformed fields, a dtype an exported file never holds, text longer than its dtype, or
            runs that do not count the values of the shape (one line saying which).

    """
    if not isinstance(packed, Mapping) or not isinstance(packed.get("dtype"), str):
        raise ValueError("a packed array must be an object with 'dtype', 'shape' and its data")
    text, shape = packed["dtype"], _shape(packed)
    if not (NUMERIC.match(text) or TEXT.match(text)):
        raise ValueError(f"dtype {text!r} is not one an exported file holds (<i8, <f8, |b1, <U3, ...)")
    dtype = np.dtype(text)
    if math.prod(shape) * dtype.itemsize > MAX_ARRAY_BYTES:
        raise ValueError(f"shape {list(shape)[:8]} x {text} would take {math.prod(shape) * dtype.itemsize / 2**20:.0f} "
                         f"MiB, more than the {MAX_ARRAY_BYTES >> 20} MiB an exported array may")
    if dtype.kind == "U":
        runs = packed.get("runs")
        if not isinstance(runs, list) or not all(
                isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and isinstance(r[1], int)
                and not isinstance(r[1], bool) and r[1] > 0 for r in runs):
            raise ValueError("'runs' must be a list of [text, positive count] pairs")
        if sum(r[1] for r in runs) != math.prod(shape):
            raise ValueError(f"'runs' count {sum(r[1] for r in runs)} values, not the {math.prod(shape)} of "
                             f"shape {list(shape)}")
        if any(len(r[0]) > dtype.itemsize // 4 for r in runs):
            raise ValueError(f"'runs' hold text longer than its dtype {text} (it would be cut)")
    return dtype, shape


def check_siblings(shapes: Mapping[str, tuple[int, ...]]) -> None:
    """The arrays of one prediction file agree: one row per window, ``y_prob`` one column per class.

    ``classes`` lists the classes; every other array (``y_true``, ``subjects``, ``y_pred``, ``y_prob``) has
    the test windows as rows, so 50 million ``subjects`` beside 8 labels is refused.

    Raises:
        ValueError: Two arrays disagree (one line naming both).

    """
    rows = {name: shape[0] if shape else None for name, shape in shapes.items() if name != "classes"}
    if any(n is None for n in rows.values()):
        raise ValueError(f"array '{next(k for k, n in rows.items() if n is None)}' has no rows (a 0-d array)")
    if len(set(rows.values())) > 1:
        first = "y_true" if "y_true" in rows else sorted(rows)[0]
        other = next(k for k in sorted(rows) if rows[k] != rows[first])
        raise ValueError(f"array '{other}' has {rows[other]} rows but '{first}' has {rows[first]} (one row per "
                         "test window)")
    if "classes" in shapes and "y_prob" in shapes:
        classes, prob = shapes["classes"], shapes["y_prob"]
        if len(classes) != 1 or len(prob) != 2 or prob[1] != classes[0]:
            raise ValueError(f"array 'y_prob' of shape {list(prob)} does not hold one column per class of "
                             f"'classes' (shape {list(classes)})")


def _inflate(data: bytes, size: int) -> bytearray:
    """Inflate zlib data that must come to to exactly ``size`` bytes, streamed: never more than ``size + 1`` held."""
    stream, out = zlib.decompressobj(), bytearray()
    while True:
        chunk = stream.decompress(data, min(1 << 20, size + 1 - len(out)))
        out += chunk
        data = stream.unconsumed_tail
        if len(out) > size:
            raise ValueError(f"'zlib_base64' inflates to more than the {size} bytes of its shape")
        if stream.eof or not (chunk or data):
            break
    if not stream.eof or stream.unused_data:
        raise ValueError("'zlib_base64' does not decode (truncated, or data after its end)")
    if len(out) != size:
        raise ValueError(f"'zlib_base64' holds {len(out)} bytes, not the {size} bytes of its shape")
    return out


def unpack(packed: Any) -> np.ndarray:
    """The array a :func:`pack` object holds (its declared size checked before anything is decoded).

    Raises:
        ValueError: The object is malformed or its data do not fill its shape (one line saying which).

    """
    dtype, shape = declared(packed)
    size = math.prod(shape)
    if dtype.kind == "U":
        runs = packed["runs"]
        values = np.array([r[0] for r in runs], dtype=dtype)
        return np.repeat(values, [r[1] for r in runs]).reshape(shape)
    try:
        raw = base64.b64decode(str(packed.get("zlib_base64", "")), validate=True)
        data = _inflate(raw, size * dtype.itemsize)
    except (binascii.Error, zlib.error) as exc:
        raise ValueError(f"'zlib_base64' does not decode ({exc})") from None
    return np.frombuffer(data, dtype=dtype).reshape(shape)  # owns its (writable) buffer


def unpack_all(packed: Any) -> dict[str, np.ndarray]:
    """Every array of one packed prediction file (``ValueError`` naming the array that is malformed).

    The declared shapes are checked against each other (:func:`check_siblings`) before any is decoded.
    """
    if not isinstance(packed, Mapping):
        raise ValueError("a packed prediction file must be an object of arrays")
    shapes = {}
    for name, value in packed.items():
        try:
            shapes[str(name)] = declared(value)[1]
        except ValueError as exc:
            raise ValueError(f"array '{name}': {exc}") from None
    check_siblings(shapes)
    out = {}
    for name, value in packed.items():
        try:
            out[str(name)] = unpack(value)
        except ValueError as exc:
            raise ValueError(f"array '{name}': {exc}") from None
    return out
