"""The spot check of a cached entry: a few windows embedded again and compared with the stored rows.

The SHA-256 beside an entry finds damage, not forgery (whoever writes the folder can rewrite both), so on
first use in a process :data:`WINDOWS` random rows (seeded from the OS once per process) are embedded again;
a relative L2 distance above :func:`tolerance_for` (which allows for batch-size dependent kernels, GPU
reductions and TF32: about 1e-3) marks the entry damaged and it is recomputed.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Windows embedded again per entry and process.
WINDOWS = 8
#: Largest relative L2 distance between a stored row and a fresh embedding, by numeric precision.
TOLERANCE_32 = 1e-2
TOLERANCE_16 = 5e-2
_PROCESS_SEED = secrets.randbits(63)


def tolerance_for(precision: str | int | None) -> float:
    """The spot check's tolerance under a Lightning precision setting."""
    return TOLERANCE_16 if "16" in str(precision or "") else TOLERANCE_32


@dataclass(frozen=True)
class SpotCheck:
    """How to embed some windows again (``embed(rows) -> [len(rows), dim]``) and how close they must be."""

    embed: Callable[[np.ndarray], np.ndarray]
    tolerance: float = TOLERANCE_32


def check_rows(key: str, values: np.ndarray, check: SpotCheck, seed: int | None = None) -> str | None:
    """What is wrong with ``values`` (an entry's rows) against fresh embeddings of a few, else None.

    Args:
        key: The entry's key (mixed into the draw, so entries are checked at different windows).
        values: The stored embeddings ``[n_windows, dim]``.
        check: The encoder's re-embedding and the tolerance.
        seed: Fixes the draw (None: this process's random seed).
    """
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
