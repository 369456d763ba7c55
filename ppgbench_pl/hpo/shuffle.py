"""Per-trial shuffling: an epoch's order depends on (trial seed, epoch) only, so stacking changes no batch."""

from __future__ import annotations

import numpy as np


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of ``n`` training rows in one epoch of the trial seeded with ``seed``."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The epoch's mini-batches of row indices (the last one may be short, as with ``drop_last=False``)."""
    order = epoch_permutation(n, seed, epoch)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]
