"""Linear-probe grids (PROTOCOL.md 4.1) and per-part StandardScaler statistics by subtraction, in float64."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from ppgbench_pl.errors import DataError

RIDGE_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
LOGISTIC_CS = (0.001, 0.01, 0.1, 1.0, 10.0)
_EPS = float(np.finfo(np.float64).eps)


class SingleClassError(DataError):
    """A logistic-regression training part holds one class (scikit-learn raises the same)."""


def check_finite(x: np.ndarray, what: str = "embeddings") -> None:
    """Refuse NaN/inf inputs in one line (``DataError``) instead of a solver failing later."""
    finite = np.isfinite(x)
    if finite.all():
        return
    rows = np.flatnonzero(~finite.reshape(len(x), -1).all(axis=1))
    raise DataError(f"{what} contain NaN/inf in {len(rows)} of {len(x)} rows (first: row {int(rows[0])}); "
                    "check the encoder's output and the input windows")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (None: leave as is), restoring the previous count (small ops: 1 is fastest)."""
    old = torch.get_num_threads()
    if n is None or n == old:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@dataclass
class Parts:
    """Per training part (inner-train parts, then all rows): size, mean (centred coordinates), scale; the centring."""

    n: torch.Tensor
    mean: torch.Tensor
    scale: torch.Tensor
    offset: torch.Tensor


def is_partition(folds: Sequence[tuple[np.ndarray, np.ndarray]], n: int) -> bool:
    """Whether the validation chunks partition the rows and each training part is the rest."""
    seen = np.zeros(n, dtype=np.int64)
    for tr, va in folds:
        if len(tr) + len(va) != n:
            return False
        seen[va] += 1
    return bool((seen == 1).all())


def _scaler(n: torch.Tensor, s1: torch.Tensor, s2: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
            offset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """StandardScaler's mean and scale of a part from its sums (constant columns as ``_is_constant_feature``)."""
    n = n[:, None]
    mean = s1 / n
    var = torch.clamp(s2 / n - mean * mean, min=0.0)
    raw_mean = mean + offset
    constant = (lo == hi) | (var <= n * _EPS * var + (n * raw_mean * _EPS) ** 2)
    scale = torch.where(constant, torch.ones_like(var), torch.sqrt(var))
    return mean, scale


def _gram(c: torch.Tensor) -> torch.Tensor:
    """c^T c; on the CPU through NumPy, whose ``a.T @ a`` is a symmetric rank-k update (half the work)."""
    if c.device.type == "cpu":
        c_np = c.numpy()
        return torch.from_numpy(c_np.T @ c_np)
    return c.T @ c


def part_statistics(x0: torch.Tensor, folds: Sequence[tuple[np.ndarray, np.ndarray]], offset: torch.Tensor,
                    chunks: list[torch.Tensor] | None) -> tuple[Parts, torch.Tensor, list[torch.Tensor]]:
    """Sizes, means and scales of every inner-training part and of all rows; the Grams of all rows and per chunk.

    ``chunks``: the validation chunks when the folds partition the rows (a part is the totals minus its chunk).
    """
    n_rows = x0.shape[0]
    dev = x0.device
    rows = []
    grams: list[torch.Tensor] = []
    if chunks is not None:
        grams = [_gram(c) for c in chunks]
        c_n = torch.tensor([float(len(c)) for c in chunks], dtype=torch.float64, device=dev)
        c_s1 = torch.stack([c.sum(0) for c in chunks])
        c_s2 = torch.stack([torch.diagonal(g).clone() for g in grams])
        c_lo = torch.stack([c.amin(0) for c in chunks])
        c_hi = torch.stack([c.amax(0) for c in chunks])
        t_n, t_s1, t_s2 = c_n.sum(), c_s1.sum(0), c_s2.sum(0)
        k = len(chunks)
        others = ~torch.eye(k, dtype=torch.bool, device=dev)
        # min/max over the other chunks: mask this chunk with +-inf
        big = torch.tensor(float("inf"), dtype=torch.float64, device=dev)
        lo = torch.where(others[:, :, None], c_lo[None], big).amin(1)
        hi = torch.where(others[:, :, None], c_hi[None], -big).amax(1)
        n = torch.cat([t_n - c_n, t_n[None]])
        s1 = torch.cat([t_s1 - c_s1, t_s1[None]])
        s2 = torch.cat([t_s2 - c_s2, t_s2[None]])
        lo = torch.cat([lo, c_lo.amin(0)[None]])
        hi = torch.cat([hi, c_hi.amax(0)[None]])
    else:
        for tr, _ in [*folds, (np.arange(n_rows), None)]:
            part = x0[torch.as_tensor(tr, device=dev, dtype=torch.long)]
            rows.append((float(len(part)), part.sum(0), (part * part).sum(0), part.amin(0), part.amax(0)))
        n = torch.tensor([r[0] for r in rows], dtype=torch.float64, device=dev)
        s1, s2, lo, hi = (torch.stack([torch.as_tensor(r[i]) for r in rows]) for i in range(1, 5))
    if (n < 1).any():
        raise DataError("an inner training part of the linear probe has no rows")
    mean, scale = _scaler(n, s1, s2, lo, hi, offset)
    return Parts(n, mean, scale, offset), torch.stack(grams).sum(0) if grams else _gram(x0), grams
