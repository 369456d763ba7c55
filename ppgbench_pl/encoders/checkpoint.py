"""Reading checkpoint files without ever running code from them (a pickle can call any importable callable).

``torch.save`` files go through ``torch.load(weights_only=True)``; plain pickles through an unpickler that maps the
torch/NumPy reconstructors they name to rebuilders written here; either way a refusal names the global.
"""

from __future__ import annotations

import _compat_pickle
import argparse
import collections
import io
import pickle
import pickletools
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from ppgbench_pl.errors import CheckpointError

#: Legacy (pre-1.6, non-zip) ``torch.save`` files start with a pickle of this number.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_GLOBAL_NAME = re.compile(r"GLOBAL ([A-Za-z_][\w.]*)")


def _refuse(what: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(f"refused {what}")


def _numpy_scalar(dtype: Any, data: Any) -> Any:
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, bytes | bytearray):
        raise _refuse(f"a NumPy scalar of {dtype!r}")
    return np.frombuffer(data, dtype=dtype)[0]


def _numpy_reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """The empty array ``ndarray.__reduce__`` starts from; its ``__setstate__`` (BUILD) fills it."""
    if subtype is not np.ndarray:
        raise _refuse(f"an array of type {subtype!r}")
    return np.ndarray(shape, dtype)


def _numpy_frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
    """A protocol-5 array: its bytes, dtype, shape and memory order."""
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise _refuse(f"an array of {dtype!r}")
    return np.frombuffer(buffer, dtype=dtype).reshape(shape, order=order)


@cache
def extra_safe_globals() -> dict[str, Any]:
    """What the authors' checkpoints hold beyond torch's weights-only set, by pickle name (NumPy 1 and 2)."""
    out: dict[str, Any] = {"numpy.dtype": np.dtype, "numpy.ndarray": np.ndarray,
                           "argparse.Namespace": argparse.Namespace}
    for package in ("numpy.core", "numpy._core"):
        out[f"{package}.multiarray.scalar"] = _numpy_scalar
        out[f"{package}.multiarray._reconstruct"] = _numpy_reconstruct
        out[f"{package}.numeric._frombuffer"] = _numpy_frombuffer
    for code in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?"):
        dtype_class = type(np.dtype(code))  # BUILD restores a dtype's state only for an allowed type
        out[f"numpy.dtypes.{dtype_class.__name__}"] = dtype_class
    return out


def _load_storage(data: bytes) -> torch.TypedStorage:
    """A plain-pickled storage: its bytes are a legacy ``torch.save`` file, read weights-only."""
    storage = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if not isinstance(storage, torch.TypedStorage):
        raise _refuse(f"a storage that loads as {type(storage).__name__}")
    return storage


def _rebuild_tensor(storage: Any, offset: int, size: Any, stride: Any, requires_grad: bool,
                    backward_hooks: Any, metadata: Any = None) -> torch.Tensor:
    """A plain-pickled tensor: a view of its storage (hooks and extra metadata are never saved)."""
    if not isinstance(storage, torch.TypedStorage) or backward_hooks or metadata:
        raise _refuse("a tensor with hooks, metadata or a storage of another kind")
    with warnings.catch_warnings():  # the pickle holds a TypedStorage; reading it is not using it
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
        tensor = torch.empty((0,), dtype=storage.dtype, device=storage.device)
        tensor.set_(storage.untyped(), offset, size, stride)
    tensor.requires_grad = requires_grad
    return tensor


def _rebuild_parameter(data: Any, requires_grad: bool, backward_hooks: Any) -> torch.nn.Parameter:
    if not isinstance(data, torch.Tensor) or backward_hooks:
        raise _refuse("a parameter with hooks")
    return torch.nn.Parameter(data, requires_grad)


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """``codecs.encode`` as Python 3 writes bytes at pickle protocol < 3, and nothing more general."""
    if encoding.lower().replace("_", "-") not in {"latin1", "latin-1", "iso-8859-1"}:
        raise _refuse(f"codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


@cache
def plain_pickle_globals() -> dict[str, Any]:
    """Every global a plain-pickle checkpoint may name, mapped to what the reader builds for it."""
    dtypes = {f"torch.{name}": value for name, value in vars(torch).items()
              if isinstance(value, torch.dtype) and not name.startswith("_")}
    rebuilders: dict[str, Callable[..., Any]] = {  # names read from the file, never imported
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch.storage._load_from_bytes": _load_storage,
    }
    containers = {"collections.OrderedDict": collections.OrderedDict, "builtins.set": set,
                  "builtins.frozenset": frozenset, "builtins.bytearray": bytearray,
                  "builtins.complex": complex, "_codecs.encode": _latin1_encode}
    return {**containers, "torch.Size": torch.Size, "torch.device": torch.device, **dtypes, **rebuilders,
            **extra_safe_globals()}


def refusal(path: Path | str, name: str) -> CheckpointError:
    """The one-line error for a file that names ``name``."""
    return CheckpointError(f"{path}: refused to load: it references {name}, which a checkpoint never needs")


def _canonical(module: str, name: str) -> str:
    """``module.name`` after the Python 2 renames the unpicklers apply (``__builtin__`` -> ``builtins``)."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{name}"


def file_format(path: Path) -> str:
    """``zip`` (torch.save >= 1.6), ``legacy`` (older torch.save) or ``pickle`` (plain pickle.dump)."""
    if zipfile.is_zipfile(path):
        return "zip"
    with path.open("rb") as handle:
        try:
            ops = list(pickletools.genops(handle))
        except Exception:  # noqa: BLE001 - not a pickle at all; the loader reports it
            return "pickle"
    values = [arg for op, arg, _ in ops if op.name not in ("PROTO", "FRAME", "STOP")]
    return "legacy" if values == [_LEGACY_MAGIC] else "pickle"


def _scan(path: Path) -> Iterator[str]:
    """Globals a ``torch.save`` zip names that the weights-only reader would refuse."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except (ValueError, RuntimeError):  # not torch.save's zip (e.g. TorchScript): torch.load says
        return
    # torch reports the names as written (protocol 2 writes ``subprocess`` as ``commands``)
    yield from sorted(_canonical(*name.rsplit(".", 1)) for name in names)


class _RestrictedUnpickler(pickle.Unpickler):
    """Plain-pickle reader that resolves only :func:`plain_pickle_globals`, refusing the rest before importing."""

    def __init__(self, handle: IO[bytes], source: Path) -> None:
        super().__init__(handle)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        full = _canonical(module, name)
        allowed = plain_pickle_globals()
        if full not in allowed:
            raise refusal(self._source, full)
        return allowed[full]


def _torch_refusal(path: Path, exc: Exception) -> CheckpointError:
    """Name the global in a weights-only unpickler error (torch drops the ``builtins.`` prefix)."""
    match = _GLOBAL_NAME.search(str(exc))
    if match:
        name = match.group(1)
        return refusal(path, name if "." in name else f"builtins.{name}")
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = next((line for line in lines if "WeightsUnpickler error" in line), lines[-1] if lines else "")
    detail = detail.replace("WeightsUnpickler error:", "").strip()
    return CheckpointError(f"{path}: refused to load: the weights-only unpickler rejected it ({detail})")


def read_checkpoint_file(path: str | Path) -> Any:
    """Load a ``torch.save`` file or a plain pickle to the CPU; CheckpointError when it names a refused global."""
    path = Path(path)
    kind = file_format(path)
    with torch.serialization.safe_globals([(obj, name) for name, obj in extra_safe_globals().items()]):
        for name in _scan(path) if kind == "zip" else ():  # plain pickles: the unpickler names the global
            raise refusal(path, name)
        if kind != "pickle":
            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError as exc:
                raise _torch_refusal(path, exc) from None
        try:
            with path.open("rb") as handle:
                return _RestrictedUnpickler(handle, path).load()
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure of an untrusted file
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise CheckpointError(f"{path}: not a torch.save file or a readable pickle ({detail})") from None
