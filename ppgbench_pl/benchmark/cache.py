"""Embedding cache: every window goes through a frozen encoder once per (encoder, weights, data, rate).

The key is a content hash of the encoder identity (class, weights digest, settings), the processed
tree's identity (its preprocessing marker, or the file listing when a tree has none), the rate and the
numeric precision, so all tasks, seeds, folds and frozen regimes of a run (and of later runs) share one
pass. Entries are written to a temporary file and moved into place with ``os.replace``, so a reader
never sees a torn file; a lock file per key makes concurrent processes compute each entry once (the
second waits, then reads). Entries are read memory-mapped, so parallel workers share one copy in the
page cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.benchmark.locks import file_lock
from ppgbench_pl.data.processed import MARKER, write_json_atomic
from ppgbench_pl.encoders.base import PPGEncoder


def data_identity(directory: str | Path) -> str:
    """Hash of a processed tree: its marker when present, else (name, size) of every array and stats file."""
    directory = Path(directory)
    marker = directory / MARKER
    digest = hashlib.sha256()
    if marker.exists():
        digest.update(marker.read_bytes())
    else:
        for path in sorted(directory.glob("*/*")):
            if path.suffix in (".npy", ".json"):
                digest.update(f"{path.relative_to(directory).as_posix()}:{path.stat().st_size}".encode())
    return digest.hexdigest()


#: Encoder attributes that change speed, never embeddings, so they stay out of the identity.
SPEED_SETTINGS = frozenset({"n_jobs", "training"})


def encoder_identity(encoder: PPGEncoder) -> dict[str, str]:
    """What determines an encoder's embeddings: class, weights and settings."""
    settings = {k: repr(v) for k, v in sorted(vars(encoder).items())
                if not k.startswith("_") and k not in SPEED_SETTINGS}
    return {
        "name": encoder.name,
        "class": f"{type(encoder).__module__}.{type(encoder).__qualname__}",
        "weights": encoder.checkpoint_digest(),
        "settings": hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(),
    }


class EmbeddingCache:
    """Embeddings on disk under ``root``, keyed by content, computed once across processes.

    Args:
        root: Folder of the ``<key>.npy`` entries (with ``<key>.json`` descriptions beside them).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def key(self, encoder: PPGEncoder, data_dir: str | Path, fs: float, precision: str | int | None = None) -> str:
        """Content key of one (encoder, data, rate, precision)."""
        payload: dict[str, Any] = {"encoder": encoder_identity(encoder), "data": data_identity(data_dir),
                                   "fs": float(fs)}
        if precision is not None and str(precision) not in ("32", "32-true"):
            payload["precision"] = str(precision)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]

    def path(self, key: str) -> Path:
        """File of one entry."""
        return self.root / f"{key}.npy"

    def get_or_compute(self, key: str, compute: Callable[[], np.ndarray],
                       describe: dict[str, Any] | None = None) -> np.ndarray:
        """The entry (read-only, memory-mapped), computed and stored first if no process has done so.

        Args:
            key: Content key from :meth:`key`.
            compute: Produces the embeddings ``[n_windows, dim]`` on a miss.
            describe: What the entry is (encoder, dataset, rate), written beside it for people.
        """
        path = self.path(key)
        if path.exists():
            self.hits += 1
            return np.load(path, mmap_mode="r")
        with file_lock(self.root / ".locks" / f"{key}.lock"):
            if path.exists():  # another process computed it while this one waited
                self.hits += 1
                return np.load(path, mmap_mode="r")
            self.misses += 1
            start = time.perf_counter()
            values = np.asarray(compute(), dtype=np.float32)
            self._store(path, values)
            write_json_atomic(self.root / f"{key}.json", {
                **(describe or {}), "shape": list(values.shape), "seconds": round(time.perf_counter() - start, 3),
            })
        return np.load(path, mmap_mode="r")

    def _store(self, path: Path, values: np.ndarray) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npy", dir=self.root)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, values)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def stats(self) -> dict[str, int]:
        """Hits and misses of this process so far."""
        return {"hits": self.hits, "misses": self.misses}
