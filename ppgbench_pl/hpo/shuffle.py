"""Per-trial shuffling that both trial engines share, so their epochs see the same batches.

A trial's shuffling seed is ``r + trial number`` (PROTOCOL.md 4.3). Each epoch's order is a pure function
of (seed, epoch), so the Lightning reference loop and the batched trainer draw identical batches, and an
order never depends on how much randomness something else consumed in between.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of ``n`` training rows in one epoch of the trial seeded with ``seed``."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The epoch's mini-batches of row indices (the last one may be short, as with ``drop_last=False``)."""
    order = epoch_permutation(n, seed, epoch)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


class EpochPermutationSampler(Sampler[int]):
    """A DataLoader sampler yielding :func:`epoch_permutation` for the current epoch.

    Lightning calls :meth:`set_epoch` before every training epoch; used on its own, the sampler moves to
    the next epoch after each pass.

    Args:
        n: Number of rows.
        seed: The trial's shuffling seed.

    """

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next pass yields."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        order = epoch_permutation(self.n, self.seed, self.epoch)
        self.epoch += 1
        return iter(torch.as_tensor(order).tolist())

    def __len__(self) -> int:
        return self.n
