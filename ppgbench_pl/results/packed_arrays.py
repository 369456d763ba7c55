"""Prediction arrays in an exported file as exact JSON objects (schema ``$defs/array``; docs/schema/README.md).

Numbers: little-endian C-order bytes, zlib, base64; text: run-length ``runs``. Reading checks the declared size
first and inflates at most one byte past it, so a hostile file never yields wrong arrays nor exhausts memory.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

NUMERIC = re.compile(r"^[<|][biuf][1248]$")
TEXT = re.compile(r"^<U[0-9]{1,6}$")
#: The most bytes one unpacked array may take (the reader of a whole file also bounds the sum by its size).
MAX_ARRAY_BYTES = 1 << 29


def pack(array: np.ndarray) -> dict[str, Any]:
    """One array as its JSON object (module docstring); ``ValueError`` unless numbers, booleans or text."""
    array = np.asarray(array)
    if array.dtype.kind in "biuf":
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        data = zlib.compress(np.ascontiguousarray(little).tobytes(), 9)
        return {"dtype": little.dtype.str, "shape": list(array.shape),
                "zlib_base64": base64.b64encode(data).decode("ascii")}
    if array.dtype.kind == "U":
        runs = [[value, len(list(group))] for value, group in itertools.groupby(array.ravel().tolist())]
        return {"dtype": array.dtype.newbyteorder("<").str, "shape": list(array.shape), "runs": runs}
    raise ValueError(f"an array of dtype {array.dtype} cannot be exported (numbers, booleans or text only)")


def pack_all(arrays: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Every array of one prediction file, by name."""
    return {str(name): pack(value) for name, value in arrays.items()}


def declared(packed: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape an object declares, checked without decoding its data (``ValueError``: one line)."""
    if not isinstance(packed, Mapping) or not isinstance(packed.get("dtype"), str):
        raise ValueError("a packed array must be an object with 'dtype', 'shape' and its data")
    text, dims = packed["dtype"], packed.get("shape")
    if not isinstance(dims, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in dims):
        raise ValueError("'shape' must be a list of non-negative integers")
    shape = tuple(dims)
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
    """The arrays of one prediction file agree: one row per window, ``y_prob`` one column per class (``ValueError``)."""
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
    """Inflate zlib data that must come to exactly ``size`` bytes, never holding more than ``size + 1``."""
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
    """The array a :func:`pack` object holds; ``ValueError`` (one line) when malformed or not filling its shape."""
    dtype, shape = declared(packed)
    if dtype.kind == "U":
        runs = packed["runs"]
        values = np.array([r[0] for r in runs], dtype=dtype)
        return np.repeat(values, [r[1] for r in runs]).reshape(shape)
    try:
        raw = base64.b64decode(str(packed.get("zlib_base64", "")), validate=True)
        data = _inflate(raw, math.prod(shape) * dtype.itemsize)
    except (binascii.Error, zlib.error) as exc:
        raise ValueError(f"'zlib_base64' does not decode ({exc})") from None
    return np.frombuffer(data, dtype=dtype).reshape(shape)  # owns its (writable) buffer


def unpack_all(packed: Any) -> dict[str, np.ndarray]:
    """Every array of one packed prediction file, shapes checked together before any is decoded."""
    if not isinstance(packed, Mapping):
        raise ValueError("a packed prediction file must be an object of arrays")
    check_siblings({str(name): _named(name, declared, value)[1] for name, value in packed.items()})
    return {str(name): _named(name, unpack, value) for name, value in packed.items()}


def _named(name: str, read: Callable[[Any], Any], value: Any) -> Any:
    try:
        return read(value)
    except ValueError as exc:
        raise ValueError(f"array '{name}': {exc}") from None
