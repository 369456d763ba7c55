"""Write pickles the way Python 2 did, so the DaLiA/WESAD fixtures match the real files' opcodes.

Python 2 stored ``str`` (and numpy's raw array bytes) as BINSTRING opcodes and named numpy's
reconstructors under ``numpy.core``. Python 3 at protocol 2 would instead emit ``_codecs.encode``
calls and ``numpy._core`` names, which the real files never contain.
"""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path
from typing import Any


class Py2Pickler(pickle._Pickler):  # type: ignore[misc]
    """Protocol-2 pickler emitting Python-2 ``str`` opcodes and numpy-1 module names."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj: bytes | str) -> None:
        data = obj if isinstance(obj, bytes) else obj.encode("ascii")
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    def save_text(self, obj: str) -> None:
        if obj.isascii():
            self.save_py2_str(obj)
        else:
            pickle._Pickler.save_str(self, obj)

    def save_global(self, obj: Any, name: str | None = None) -> None:
        name = name or obj.__qualname__
        module = pickle.whichmodule(obj, name)
        if module.startswith("numpy._core"):
            module = "numpy.core" + module[len("numpy._core") :]
        if module == "builtins":
            module = "__builtin__"
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode())
        self.memoize(obj)

    dispatch[bytes] = save_py2_str
    dispatch[str] = save_text


def dumps_py2(obj: Any) -> bytes:
    """Bytes of ``obj`` pickled as Python 2 would have."""
    buffer = io.BytesIO()
    Py2Pickler(buffer, protocol=2).dump(obj)
    return buffer.getvalue()


def write_py2_pickle(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` as a Python-2 style pickle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps_py2(obj))
