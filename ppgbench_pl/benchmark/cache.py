"""Embedding cache: every window goes through a frozen encoder once per (encoder, weights, data, rate).

The key is a content hash of the encoder identity (class, weights digest, settings), the processed
tree's identity (its preprocessing marker, or the file listing when a tree has none) and the rate, so
all tasks, seeds, folds and frozen regimes share one pass. Entries are written to a temporary file and
moved into place with ``os.replace``: concurrent writers of the same key cannot leave a torn file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ppgbench_pl.data.processed import MARKER
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


def encoder_identity(encoder: PPGEncoder) -> dict[str, str]:
    """What determines an encoder's embeddings: class, weights and settings."""
    settings = {k: repr(v) for k, v in sorted(vars(encoder).items()) if not k.startswith("_") and k != "training"}
    return {
        "name": encoder.name,
        "class": f"{type(encoder).__module__}.{type(encoder).__qualname__}",
        "weights": encoder.checkpoint_digest(),
        "settings": hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(),
    }


class EmbeddingCache:
    """Embeddings on disk under ``root``, keyed by content.

    Args:
        root: Folder of the ``<key>.npy`` files.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def key(self, encoder: PPGEncoder, data_dir: str | Path, fs: float) -> str:
        """Content key of one (encoder, data, rate)."""
        payload = {"encoder": encoder_identity(encoder), "data": data_identity(data_dir), "fs": float(fs)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]

    def get_or_compute(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """Load the entry, or compute, store atomically and return it."""
        path = self.root / f"{key}.npy"
        if path.exists():
            self.hits += 1
            return np.load(path)
        self.misses += 1
        values = np.asarray(compute(), dtype=np.float32)
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".npy", dir=self.root)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, values)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return values
