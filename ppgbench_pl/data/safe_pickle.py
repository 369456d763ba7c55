"""A restricted unpickler for the DaLiA and WESAD pickles: only the globals they need, so a bad file runs nothing."""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ppgbench_pl.errors import DataError

#: Python-2 and numpy-1 module names, mapped to where the objects live now.
_MODULE_ALIASES: dict[str, str] = {
    "__builtin__": "builtins",
    "numpy.core.multiarray": "numpy._core.multiarray",
    "numpy.core._multiarray_umath": "numpy._core.multiarray",
    "numpy._core._multiarray_umath": "numpy._core.multiarray",
    "numpy.core.numeric": "numpy._core.numeric",
}

#: The only globals a subject pickle may name (after aliasing).
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "bytearray"),
        ("_codecs", "encode"),  # how Python 3 writes bytes at protocol < 3
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy._core.numeric", "_frombuffer"),  # protocol-5 arrays
    }
)


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as Python 3 uses it for bytes at protocol < 3, and nothing more general."""
    if encoding.lower().replace("_", "-") not in {"latin1", "latin-1", "iso-8859-1"}:
        raise pickle.UnpicklingError(f"refused _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler whose ``find_class`` only returns allow-listed globals."""

    def __init__(self, handle: BinaryIO, source: Path) -> None:
        super().__init__(handle, encoding="latin1")
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        """Resolve an allow-listed global; refuse anything else before importing it."""
        canonical = _MODULE_ALIASES.get(module, module)  # old and new spellings of one object compare equal
        if (canonical, name) not in ALLOWED_GLOBALS:
            raise DataError(f"{self._source}: pickle refers to '{module}.{name}', which is not allowed")
        if (canonical, name) == ("_codecs", "encode"):
            return _latin1_encode
        return getattr(importlib.import_module(canonical), name)


def load_pickle(path: str | Path) -> Any:
    """Load a (Python-2, latin-1) pickle of containers, scalars and numpy arrays (DataError: anything else)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            return _RestrictedUnpickler(handle, path).load()
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except MemoryError:
        raise DataError(f"{path}: pickle needs more memory than is available; is it corrupt?") from None
    except Exception as exc:  # noqa: BLE001 - any parse failure of an untrusted file is a data error
        raise DataError(f"{path}: not a readable pickle ({type(exc).__name__}: {' '.join(str(exc).split())})") from None


def lookup(data: Any, keys: Sequence[str], source: str | Path) -> Any:
    """Walk nested dicts, e.g. ``("signal", "wrist", "BVP")``; DataError naming ``source`` for a missing level."""
    node = data
    for depth, key in enumerate(keys):
        where = "/".join(keys[: depth + 1])
        if not isinstance(node, Mapping):
            parent = "/".join(keys[:depth]) or "top level"
            raise DataError(f"{source}: '{parent}' is a {type(node).__name__}, not a dict (looking for '{where}')")
        if key not in node:
            raise DataError(f"{source}: missing key '{where}'")
        node = node[key]
    return node


def lookup_vector(data: Any, keys: Sequence[str], source: str | Path) -> np.ndarray:
    """A numeric 1-D signal at ``keys`` (E4 ``[n, 1]`` columns squeezed); DataError for anything else."""
    where = "/".join(keys)
    value = np.asarray(lookup(data, keys, source))
    if value.dtype.kind not in "biuf":
        raise DataError(f"{source}: '{where}' holds {value.dtype} values, expected numbers")
    if value.ndim == 2 and value.shape[1] == 1:
        value = value[:, 0]
    if value.ndim != 1:
        raise DataError(f"{source}: '{where}' has shape {value.shape}, expected [n] or [n, 1]")
    return value
