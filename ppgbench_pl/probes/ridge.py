"""Ridge over a whole inner-CV grid at once: ``StandardScaler + Ridge(alpha)`` from one Gram matrix per fold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ppgbench_pl.probes.linear import RIDGE_ALPHAS, is_partition, part_statistics, torch_threads


@dataclass
class RidgeModel:
    """A fitted standardise-then-ridge model (raw-space mean and scale, standardised coefficients)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # [d, t]
    intercept: np.ndarray  # [t]
    squeeze: bool

    def predict(self, x: np.ndarray) -> np.ndarray:
        """``((x - mean) / scale) @ coef + intercept``."""
        out = ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef + self.intercept
        return out[:, 0] if self.squeeze else out


def _tridiagonal_path(a: np.ndarray, b: np.ndarray, alphas: np.ndarray) -> np.ndarray | None:
    """``(a + alpha I) x = b`` for every alpha (``dsytrd`` then ``dptsv``); None if not positive definite."""
    from scipy.linalg import lapack

    d = a.shape[0]
    if d < 2:
        return None
    at = a.T  # symmetric: the Fortran-ordered view of the same matrix, no copy
    c, diag, off, tau, info = lapack.dsytrd(at, lower=1, lwork=64 * d)
    if info != 0:
        return None
    reflectors = np.asfortranarray(c[1:, :-1])  # a = Q T Q^T with Q = H(1)...H(d-1) acting on rows 1..d-1

    def apply_q(m: np.ndarray, trans: str) -> np.ndarray | None:
        out = np.array(m, order="F", copy=True)
        part, _, status = lapack.dormqr("L", trans, reflectors, tau, out[1:], lwork=64 * max(d, m.shape[1]))
        if status != 0:
            return None
        out[1:] = part
        return out

    qtb = apply_q(b, "T")
    if qtb is None:
        return None
    solutions = []
    for alpha in alphas:
        _, _, z, info = lapack.dptsv(diag + alpha, off, qtb)
        if info != 0:
            return None
        solutions.append(z)
    coefs = apply_q(np.concatenate(solutions, axis=1), "N")
    if coefs is None:
        return None
    return np.ascontiguousarray(coefs.reshape(d, len(alphas), -1).transpose(1, 0, 2))


def ridge_path(a: torch.Tensor, b: torch.Tensor, alphas: torch.Tensor) -> torch.Tensor:
    """``(a + alpha I)^-1 b`` for every alpha, ``[n_alpha, d, t]``: tridiagonal on the CPU, else eigh."""
    if a.device.type == "cpu":
        out = _tridiagonal_path(a.numpy(), b.numpy(), alphas.numpy())
        if out is not None:
            return torch.from_numpy(out)
    lam, q = torch.linalg.eigh(a)
    c = q.T @ b  # [d, t]
    return q @ (c[None] / (lam[None, :, None] + alphas[:, None, None]))


class RidgeCV:
    """Every alpha on every inner fold of one outer-training part, plus refits, from one Gram matrix."""

    def __init__(self, alphas: Sequence[float] = RIDGE_ALPHAS, device: str | torch.device | None = None,
                 num_threads: int | None = 1) -> None:
        self.alphas = tuple(float(a) for a in alphas)
        self.device = torch.device(device if device is not None else "cpu")
        self.num_threads = num_threads

    def fit(self, x: np.ndarray, y: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]]) -> RidgeCV:
        """Statistics of every part, and per inner fold the validation predictions of every alpha."""
        with torch_threads(self.num_threads):
            y2 = np.asarray(y, dtype=np.float64)
            self._squeeze = y2.ndim == 1
            y2 = y2[:, None] if self._squeeze else y2
            xt = torch.as_tensor(np.asarray(x, dtype=np.float64), device=self.device)
            yt = torch.as_tensor(y2, device=self.device)
            offset = xt.mean(0)
            x0 = xt - offset
            self._y_offset = yt.mean(0)
            y0 = yt - self._y_offset
            val_idx = [torch.as_tensor(va, device=self.device, dtype=torch.long) for _, va in folds]
            chunks = [x0[i] for i in val_idx] if is_partition(folds, len(x0)) else None
            parts, total, grams = part_statistics(x0, folds, offset, chunks)
            self._parts = parts
            partition = bool(grams)
            # X^T y and sum y per validation chunk (or per training part when the folds do not partition)
            if partition:
                assert chunks is not None
                c_xy = [c.T @ y0[i] for c, i in zip(chunks, val_idx, strict=True)]
                c_y = [y0[i].sum(0) for i in val_idx]
                t_xy, t_y = torch.stack(c_xy).sum(0), torch.stack(c_y).sum(0)
            else:
                t_xy, t_y = x0.T @ y0, y0.sum(0)
            alphas = torch.tensor(self.alphas, dtype=torch.float64, device=self.device)
            self.cv_predictions_: list[np.ndarray] = []
            for p, (tr, _) in enumerate(folds):
                if partition:
                    g, xy, sy = total - grams[p], t_xy - c_xy[p], t_y - c_y[p]
                else:
                    rows = torch.as_tensor(tr, device=self.device, dtype=torch.long)
                    g, xy, sy = x0[rows].T @ x0[rows], x0[rows].T @ y0[rows], y0[rows].sum(0)
                a, b, ybar = self._system(g, xy, sy, p)
                coefs = ridge_path(a, b, alphas)  # [n_alpha, d, t]
                xv = ((chunks[p] if chunks is not None else x0[val_idx[p]]) - parts.mean[p]) / parts.scale[p]
                pred = torch.einsum("nd,adt->ant", xv, coefs) + ybar + self._y_offset
                out = pred.cpu().numpy()
                self.cv_predictions_.append(out[..., 0] if self._squeeze else out)
            self._total = (total, t_xy, t_y)
            return self

    def _system(self, g: torch.Tensor, xy: torch.Tensor, sy: torch.Tensor,
                p: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Standardised centred scatter, right-hand side and target mean of part ``p``."""
        n, mu, s = self._parts.n[p], self._parts.mean[p], self._parts.scale[p]
        ybar = sy / n
        a = (g - n * torch.outer(mu, mu)) / torch.outer(s, s)
        b = (xy - n * torch.outer(mu, ybar)) / s[:, None]
        return a, b, ybar

    def refit(self, alpha: float) -> RidgeModel:
        """The model of one alpha on all rows (a Cholesky solve on the totals)."""
        with torch_threads(self.num_threads):
            g, xy, sy = self._total
            p = len(self._parts.n) - 1
            a, b, ybar = self._system(g, xy, sy, p)
            a = a + alpha * torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
            coef = torch.cholesky_solve(b, torch.linalg.cholesky(a))
            parts = self._parts
            return RidgeModel((parts.mean[p] + parts.offset).cpu().numpy(), parts.scale[p].cpu().numpy(),
                              coef.cpu().numpy(), (ybar + self._y_offset).cpu().numpy(), self._squeeze)
