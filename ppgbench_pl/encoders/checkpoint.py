"""Reading checkpoint files without ever running code from them.

A pickle can name any importable callable (``os.system``, ``builtins.exec``, ...) and have the unpickler
call it, so a downloaded or shared checkpoint is untrusted input. Every encoder reads its weights through
:func:`read_checkpoint_file`, which

1. lists the globals the file's pickle names (a static scan: nothing is imported or called) and refuses
   the file, in one line naming the first global outside :func:`allowed_globals`;
2. only then unpickles it with an unpickler restricted to the same allow-list: ``torch.load(...,
   weights_only=True)`` for ``torch.save`` files (zip and legacy formats), or our own restricted
   unpickler for a plain :func:`pickle.dump` file, so a pickle that slipped past the scan is still refused.

The allow-list is torch's weights-only set (tensors, storages, dtypes, ``OrderedDict``, ...) plus exactly
what the authors' training checkpoints hold besides tensors: NumPy scalars and arrays (PulsePPG's
``test_loss``) and ``argparse.Namespace`` (SigmaPPG's ``args``). There is no fallback to a full unpickle.
"""

from __future__ import annotations

import _compat_pickle
import argparse
import io
import pickle
import pickletools
import re
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from ppgbench_pl.errors import CheckpointError

#: Legacy (pre-1.6, non-zip) ``torch.save`` files start with a pickle of this number.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
#: Pickles read at most from the head of a legacy file (magic, protocol, system info, object, storage keys).
_LEGACY_PICKLES = 5
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                         "SHORT_BINSTRING", "BINSTRING", "STRING"})
_GLOBAL_NAME = re.compile(r"GLOBAL ([A-Za-z_][\w.]*)")


def _numpy_globals() -> dict[str, Any]:
    """NumPy scalars, dtypes and arrays, under both the NumPy 1 and NumPy 2 module names."""
    multiarray: Any = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # type: ignore[attr-defined]
    out: dict[str, Any] = {"numpy.dtype": np.dtype, "numpy.ndarray": np.ndarray}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out[f"{module}.scalar"] = multiarray.scalar
        out[f"{module}._reconstruct"] = multiarray._reconstruct
    for code in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?"):
        dtype_class = type(np.dtype(code))
        out[f"numpy.dtypes.{dtype_class.__name__}"] = dtype_class
    return out


@cache
def extra_safe_globals() -> dict[str, Any]:
    """Return what the authors' checkpoints hold beyond torch's weights-only set, by pickle name."""
    return {**_numpy_globals(), "argparse.Namespace": argparse.Namespace}


@cache
def allowed_globals() -> dict[str, Any]:
    """Every global a checkpoint may name: torch's weights-only set plus :func:`extra_safe_globals`."""
    from torch import _weights_only_unpickler

    return {**_weights_only_unpickler._get_allowed_globals(), **extra_safe_globals()}


def refusal(path: Path | str, name: str) -> CheckpointError:
    """Build the one-line error for a file that names ``name``."""
    return CheckpointError(f"{path}: refused to load: it references {name}, which a checkpoint never needs")


def _canonical(module: str, name: str) -> str:
    """``module.name`` after the Python 2 renames the unpicklers apply (``__builtin__`` -> ``builtins``)."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{name}"


def pickle_globals(stream: IO[bytes]) -> Iterator[str]:
    """Globals one pickle (from the stream's position up to its STOP) names, without unpickling it.

    ``STACK_GLOBAL`` takes its names from the stack; they are tracked through the memo. A name built at
    load time, or an extension-registry code, is reported as such, which no allow-list contains.
    """
    memo: dict[int, Any] = {}
    recent: list[Any] = []
    for opcode, arg, _ in pickletools.genops(stream):
        op = opcode.name
        if op in ("GLOBAL", "INST"):
            module, _, name = str(arg).partition(" ")
            yield _canonical(module, name)
        elif op == "STACK_GLOBAL":
            top = recent[-2:] if len(recent) >= 2 else [None, None]
            if isinstance(top[0], str) and isinstance(top[1], str):
                yield _canonical(top[0], top[1])
            else:
                yield "<a global whose name is computed at load time>"
        elif op in ("EXT1", "EXT2", "EXT4"):
            yield f"<copyreg extension code {arg}>"
        elif op in _STRING_OPS:
            recent.append(arg.decode("latin1") if isinstance(arg, bytes) else arg)
        elif op == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
        elif op in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(str(arg))] = recent[-1] if recent else None
        elif op in ("GET", "BINGET", "LONG_BINGET"):
            recent.append(memo.get(int(str(arg))))
        elif opcode.stack_after:
            recent.append(None)
        del recent[:-2]


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


def _scan(path: Path, kind: str) -> Iterator[str]:
    """Globals of the pickles a file holds (for legacy files, the pickles before the raw storages)."""
    if kind == "zip":
        with zipfile.ZipFile(path) as archive:
            for record in archive.namelist():
                if record.endswith("data.pkl"):
                    yield from pickle_globals(io.BytesIO(archive.read(record)))
        return
    with path.open("rb") as handle:
        for _ in range(_LEGACY_PICKLES if kind == "legacy" else 1):
            try:
                yield from list(pickle_globals(handle))
            except Exception:  # noqa: BLE001 - end of the pickled head (raw bytes follow)
                return


def _safe_load_from_bytes(data: bytes) -> Any:
    """``torch.storage._load_from_bytes`` (how plain-pickled tensors store their data), weights only."""
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


class _RestrictedUnpickler(pickle.Unpickler):
    """Plain-pickle reader that resolves only allow-listed globals."""

    def __init__(self, handle: IO[bytes], source: Path) -> None:
        super().__init__(handle)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        """Return an allow-listed object; anything else is refused before it is imported."""
        full = _canonical(module, name)
        if full == "torch.storage._load_from_bytes":
            return _safe_load_from_bytes
        allowed = allowed_globals()
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
    """Load a ``torch.save`` file or a plain pickle to the CPU, unpickling allow-listed globals only.

    Raises:
        CheckpointError: The file names a global outside :func:`allowed_globals` (one line naming the file
            and the global), or the restricted unpickler refuses it for another reason.

    """
    path = Path(path)
    kind = file_format(path)
    allowed = allowed_globals()
    for name in _scan(path, kind):
        if name not in allowed and name != "torch.storage._load_from_bytes":
            raise refusal(path, name)
    if kind == "pickle":
        try:
            with path.open("rb") as handle:
                return _RestrictedUnpickler(handle, path).load()
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parse failure of an untrusted file
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise CheckpointError(f"{path}: not a torch.save file or a readable pickle ({detail})") from None
    try:
        extras: list[Any] = [(obj, name) for name, obj in extra_safe_globals().items()]
        with torch.serialization.safe_globals(extras):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise _torch_refusal(path, exc) from None
