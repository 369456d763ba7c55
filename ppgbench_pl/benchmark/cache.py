"""Embedding cache: content-keyed entries computed once across processes, checked on first use in each."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.atomic_io import save_npy_atomic, write_json_atomic
from ppgbench_pl.benchmark.cache_store import ENTRY_KIND, claim, entry_lock, evict, is_own_entry, touch
from ppgbench_pl.data.download.files import file_hashes
from ppgbench_pl.data.processed import MARKER
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import file_lock

#: Windows embedded again per entry and process.
WINDOWS = 8
#: Largest relative L2 distance between a stored row and a fresh embedding, by numeric precision.
TOLERANCE_32 = 1e-2
TOLERANCE_16 = 5e-2
_PROCESS_SEED = secrets.randbits(63)


def tolerance_for(precision: str | int | None) -> float:
    """The spot check's tolerance under a Lightning precision (batch-size kernels, GPU reductions, TF32: ~1e-3)."""
    return TOLERANCE_16 if "16" in str(precision or "") else TOLERANCE_32


@dataclass(frozen=True)
class SpotCheck:
    """How to embed some windows again (``embed(rows) -> [len(rows), dim]``) and how close they must be."""

    embed: Callable[[np.ndarray], np.ndarray]
    tolerance: float = TOLERANCE_32


def check_rows(key: str, values: np.ndarray, check: SpotCheck, seed: int | None = None) -> str | None:
    """What is wrong with an entry's rows against fresh embeddings of a few (drawn by ``seed`` and ``key``), or None."""
    n = len(values)
    if n == 0:
        return None
    mix = int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)
    rng = np.random.default_rng([_PROCESS_SEED if seed is None else seed, mix])
    rows = np.sort(rng.choice(n, size=min(WINDOWS, n), replace=False))
    stored = np.asarray(values[rows], dtype=np.float64)
    fresh = np.asarray(check.embed(rows), dtype=np.float64)
    if fresh.shape != stored.shape:
        return f"its rows are {stored.shape[1:]} wide where the encoder gives {fresh.shape[1:]}"
    if not np.isfinite(stored).all():
        return f"window {int(rows[np.flatnonzero(~np.isfinite(stored).all(axis=1))[0]])} holds NaN/inf"
    flat_f, flat_s = fresh.reshape(len(rows), -1), stored.reshape(len(rows), -1)
    scale = np.maximum(np.maximum(np.linalg.norm(flat_f, axis=1), np.linalg.norm(flat_s, axis=1)), 1e-12)
    error = np.linalg.norm(flat_f - flat_s, axis=1) / scale
    worst = int(np.argmax(error))
    if error[worst] > check.tolerance:
        return (f"window {int(rows[worst])} of {n} differs from a fresh embedding by {error[worst]:.3g} (relative L2, "
                f"tolerance {check.tolerance:g}): a forged or stale entry")
    return None


def data_identity(directory: str | Path) -> str:
    """Hash of a processed tree: its marker when present, else (name, size) of every array and stats file."""
    directory = Path(directory)
    marker = directory / MARKER
    digest = hashlib.sha256()
    if marker.exists():
        digest.update(marker.read_bytes())
    else:
        for path in sorted(p for p in directory.glob("*/*") if p.suffix in (".npy", ".json")):
            digest.update(f"{path.relative_to(directory).as_posix()}:{path.stat().st_size}".encode())
    return digest.hexdigest()


def encoder_identity(encoder: PPGEncoder) -> dict[str, str]:
    """What determines an encoder's embeddings: class, weights and settings (not ``n_jobs``/``training``: speed)."""
    published = type(encoder).protocol_switches  # a switch at its published value keeps the old digest
    settings = {k: repr(v) for k, v in sorted(vars(encoder).items()) if not k.startswith("_")
                and k not in ("n_jobs", "training") and not (k in published and v == published[k])}
    return {
        "name": encoder.name,
        "class": f"{type(encoder).__module__}.{type(encoder).__qualname__}",
        "weights": encoder.checkpoint_digest(),
        "settings": hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(),
    }


#: Entry files this process verified, by (path, inode, size, mtime): a rewritten file is verified again.
_VERIFIED: set[tuple[str, int, int, int]] = set()


def _identity(path: Path) -> tuple[str, int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return str(path), found.st_ino, found.st_size, found.st_mtime_ns


class EmbeddingCache:
    """``<key>.npy`` entries (``<key>.json`` beside) under ``root``, at most ``size_cap`` bytes (LRU eviction)."""

    def __init__(self, root: str | Path, size_cap: float | None = None) -> None:
        self.root, self.size_cap = Path(root), size_cap
        self.hits = self.misses = 0
        self._claimed = False
        self._touched: set[str] = set()
        self._suspect: dict[tuple[str, int, int, int], str] = {}

    def key(self, encoder: PPGEncoder, data_dir: str | Path, fs: float, precision: str | int | None = None,
            content: str | None = None) -> str:
        """Content key of one (encoder, data, windows, rate, precision)."""
        payload: dict[str, Any] = {"encoder": encoder_identity(encoder), "data": data_identity(data_dir),
                                   "fs": float(fs)}
        if content is not None:
            payload["windows"] = content
        if precision is not None and str(precision) not in ("32", "32-true"):
            payload["precision"] = str(precision)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]

    def path(self, key: str) -> Path:
        """File of one entry."""
        return self.root / f"{key}.npy"

    def get_or_compute(self, key: str, compute: Callable[[], np.ndarray],
                       describe: dict[str, Any] | None = None, expected_bytes: int | None = None,
                       max_bytes: float | None = None, check: SpotCheck | None = None) -> np.ndarray:
        """The entry (read-only, memory-mapped), ``compute``d and stored first if no process has done so.

        Raises:
            ConfigError: The entry would not fit (disk, ``max_bytes``), or the folder is not ppgbench's.
        """
        if not self._claimed:
            claim(self.root)
            self._claimed = True
        found = self._read(key, locked=False, check=check, describe=describe)
        if found is None:
            with file_lock(entry_lock(self.root, key)):  # another process may compute it while this one waits
                found = self._read(key, locked=True, check=check, describe=describe)
                if found is None:
                    self.check_space(expected_bytes, max_bytes, describe)
                    self._store(key, compute, describe)
            if found is None and self.size_cap is not None:
                evict(self.root, self.size_cap, keep={key})
        self.hits += int(found is not None)
        return np.load(self.path(key), mmap_mode="r") if found is None else found

    def _store(self, key: str, compute: Callable[[], np.ndarray], describe: dict[str, Any] | None) -> None:
        path, start = self.path(key), time.perf_counter()
        self.misses += 1
        values = np.asarray(compute(), dtype=np.float32)
        save_npy_atomic(path, values)
        write_json_atomic(self.root / f"{key}.json", {
            **(describe or {}), "ppgbench": ENTRY_KIND, "key": key, "shape": list(values.shape),
            "bytes": path.stat().st_size, "sha256": file_hashes(path, ("sha256",))["sha256"],
            "seconds": round(time.perf_counter() - start, 3),
        })
        if (identity := _identity(path)) is not None:
            _VERIFIED.add(identity)
        self._touched.add(key)

    def _read(self, key: str, locked: bool = False, check: SpotCheck | None = None,
              describe: dict[str, Any] | None = None) -> np.ndarray | None:
        """The entry when it exists and is intact (verified once per process); removed when damaged and ``locked``."""
        path = self.path(key)
        identity = _identity(path)
        if identity is None:
            return None
        if identity not in _VERIFIED:
            problem = self._suspect.get(identity) or self._problem(key)
            if problem is None and check is not None:
                problem = check_rows(key, np.load(path, mmap_mode="r"), check)
                if problem is not None:
                    self._suspect[identity] = problem  # the locked read need not embed the windows again
            if problem is not None:
                if locked:
                    what = ", ".join(f"{k} {v}" for k, v in (describe or {}).items())
                    print(f"embedding cache: {path}{f' ({what})' if what else ''} is damaged ({problem}); "
                          "recomputing it", file=sys.stderr)
                    path.unlink(missing_ok=True)
                return None
            _VERIFIED.add(identity)
        if key not in self._touched:
            touch(self.root, key)  # once per cache object: the LRU order
            self._touched.add(key)
        return np.load(path, mmap_mode="r")

    def _problem(self, key: str) -> str | None:
        path, meta_path = self.path(key), self.root / f"{key}.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError):
            return f"its description {meta_path.name} is missing or unreadable"
        if not is_own_entry(meta, key):
            return f"its description {meta_path.name} does not name it as a ppgbench entry of this cache"
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return "it was removed while being checked"
        if meta.get("bytes") is not None and size != meta["bytes"]:
            return f"{size} bytes where {meta['bytes']} were written"
        try:
            values = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as exc:
            return str(exc).splitlines()[0]
        if meta.get("shape") is not None and list(values.shape) != list(meta["shape"]):
            return f"shape {list(values.shape)} where {meta['shape']} was written"
        if meta.get("sha256") is not None and file_hashes(path, ("sha256",))["sha256"] != meta["sha256"]:
            return "its content does not match the SHA-256 written with it"
        return None

    def check_space(self, expected: int | None, limit: float | None, describe: dict[str, Any] | None) -> None:
        """Refuse an entry of ``expected`` bytes above ``limit`` or the free disk (one line)."""
        if expected is None:
            return
        what = ", ".join(f"{k} {v}" for k, v in (describe or {}).items()) or "an entry"
        if limit is not None and expected > limit:
            raise ConfigError(f"embedding cache for {what} would take {expected / 1e9:.3g} GB, above the cap of "
                              f"{limit / 1e9:.3g} GB (--max_cache_gb)")
        if self.size_cap is not None and expected > self.size_cap:
            raise ConfigError(f"embedding cache for {what} would take {expected / 1e9:.3g} GB, more than the whole "
                              f"cache may hold ({self.size_cap / 1e9:.3g} GB, --cache_size_gb or $PPGBENCH_CACHE_GB)")
        existing = next((p for p in (self.root, *self.root.parents) if p.exists()), Path("."))
        free = shutil.disk_usage(existing).free  # nothing is created: this runs before a folder is written
        if expected > free:
            raise ConfigError(f"embedding cache for {what} would take {expected / 1e9:.1f} GB but {self.root} has "
                              f"{free / 1e9:.1f} GB free")

    def stats(self) -> dict[str, int]:
        """Hits and misses of this process so far."""
        return {"hits": self.hits, "misses": self.misses}
