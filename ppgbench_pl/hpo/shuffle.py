"""Per-trial shuffling: an epoch's order depends on (trial seed, epoch) only, so stacking changes no batch."""

from __future__ import annotations

import numpy as np


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of ``n`` training rows in one epoch of the trial seeded with ``seed``."""
    return np.random.default_rng([seed, epoch]).permutation(n)
