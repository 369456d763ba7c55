"""Linear probes with the protocol's grids (PROTOCOL.md 4.1) at the arithmetic limit, in float64.

This module holds the grids, the per-part statistics and ridge; the logistic probe is scikit-learn's own
``Pipeline(StandardScaler(), LogisticRegression(C, lbfgs))`` (:class:`~ppgbench_pl.probes.families.LogisticFamily`).

Ridge here is ``Pipeline(StandardScaler(), Ridge(alpha))`` in disguise (the references in the tests and
``tools/bench_linear.py``), but the whole inner-CV grid of one outer fold is solved at once: one d x d Gram
matrix per outer fold, accumulated per inner validation chunk; each inner training part's Gram, sums and
standardisation follow by subtraction, and one reduction per inner fold gives every alpha: a tridiagonal
one on the CPU (LAPACK ``dsytrd``, a third of an eigendecomposition's cost, then an O(d) solve per alpha),
an eigendecomposition elsewhere.

Standardisation is StandardScaler's (population std; constant columns keep scale 1), fitted on each
training part, derived from sums of the outer-training rows after centring them once on their mean
(which leaves the fitted models unchanged and keeps the sums well conditioned).
"""

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
    """Refuse NaN/inf inputs in one line instead of a solver failing later ("SVD did not converge").

    Raises:
        DataError: ``x`` has a non-finite value.

    """
    finite = np.isfinite(x)
    if finite.all():
        return
    rows = np.flatnonzero(~finite.reshape(len(x), -1).all(axis=1))
    raise DataError(f"{what} contain NaN/inf in {len(rows)} of {len(x)} rows (first: row {int(rows[0])}); "
                    "check the encoder's output and the input windows")


def _device(device: str | torch.device | None) -> torch.device:
    return torch.device(device) if device is not None else torch.device("cpu")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (None: leave as is), restoring the previous count.

    The solvers are sequences of small operations; on a 2-vCPU machine shared with other work, torch's
    intra-op thread pool made one iteration 10-50x slower than a single thread, so one is the default.
    """
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
    """Sufficient statistics of every training part of one outer fold (inner-train parts, then all rows).

    Attributes are torch float64 tensors, one row per part: ``n`` [P], ``mean`` [P, d] (in the centred
    coordinates), ``scale`` [P, d] (StandardScaler's, constant columns 1), ``offset`` [d] (the centring).
    """

    n: torch.Tensor
    mean: torch.Tensor
    scale: torch.Tensor
    offset: torch.Tensor


def _is_partition(folds: Sequence[tuple[np.ndarray, np.ndarray]], n: int) -> bool:
    """Whether the validation chunks partition the rows and each training part is the rest."""
    seen = np.zeros(n, dtype=np.int64)
    for tr, va in folds:
        if len(tr) + len(va) != n:
            return False
        seen[va] += 1
    return bool((seen == 1).all())


def _scaler(n: torch.Tensor, s1: torch.Tensor, s2: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
            offset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """StandardScaler's mean and scale of a part from its sums (centred coordinates).

    A column is constant when its min equals its max on the part, or when its variance is below
    scikit-learn's error bound of the two-pass variance (``_is_constant_feature``, on the raw mean).
    """
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
                    gram: bool = False, chunks: list[torch.Tensor] | None = None,
                    ) -> tuple[Parts, torch.Tensor | None, list[torch.Tensor]]:
    """Sizes, means and scales of every inner-training part and of all rows; optionally their Grams.

    With partitioning folds (what the inner group split yields), the statistics of each inner-training
    part are the totals minus its validation chunk's; otherwise they are computed from its rows.

    Returns:
        (parts, Gram of all rows or None, per validation chunk its Gram: empty unless ``gram`` and the
        folds partition the rows).

    """
    n_rows = x0.shape[0]
    dev = x0.device
    val_idx = [torch.as_tensor(va, device=dev, dtype=torch.long) for _, va in folds]
    rows = []
    grams: list[torch.Tensor] = []
    if _is_partition(folds, n_rows):
        chunks = [x0[i] for i in val_idx] if chunks is None else chunks
        if gram:
            grams = [_gram(c) for c in chunks]
        c_n = torch.tensor([float(len(c)) for c in chunks], dtype=torch.float64, device=dev)
        c_s1 = torch.stack([c.sum(0) for c in chunks])
        squares = [torch.diagonal(g).clone() for g in grams] if gram else [(c * c).sum(0) for c in chunks]
        c_s2 = torch.stack(squares)
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
    total = None
    if gram:
        total = torch.stack(grams).sum(0) if grams else _gram(x0)
    return Parts(n, mean, scale, offset), total, grams


# --------------------------------------------------------------------------------------------------- ridge


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


def _targets(y: np.ndarray) -> tuple[np.ndarray, bool]:
    y = np.asarray(y, dtype=np.float64)
    return (y[:, None], True) if y.ndim == 1 else (y, False)


def _tridiagonal_path(a: np.ndarray, b: np.ndarray, alphas: np.ndarray) -> np.ndarray | None:
    """Solutions of ``(a + alpha I) x = b`` for every alpha through one tridiagonal reduction (LAPACK).

    ``a = Q T Q^T`` (``dsytrd``, Householder) costs about a third of a full eigendecomposition; each
    alpha is then one O(d) tridiagonal solve (``dptsv``) between two applications of ``Q`` (``dormqr``).
    Orthogonal transforms only, so as accurate as the eigendecomposition. ``None`` when a shifted
    system is not positive definite (the caller then takes the eigendecomposition).
    """
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
    """``(a + alpha I)^-1 b`` for every alpha: ``[n_alpha, d, t]``.

    On the CPU one tridiagonal reduction serves every alpha (:func:`_tridiagonal_path`); elsewhere, or
    when that cannot be used, ``coef(alpha) = Q diag(1 / (lam + alpha)) Q^T b`` from one eigendecomposition.
    """
    if a.device.type == "cpu":
        out = _tridiagonal_path(a.numpy(), b.numpy(), alphas.numpy())
        if out is not None:
            return torch.from_numpy(out)
    lam, q = torch.linalg.eigh(a)
    c = q.T @ b  # [d, t]
    return q @ (c[None] / (lam[None, :, None] + alphas[:, None, None]))


class RidgeCV:
    """Every alpha on every inner fold of one outer-training part, plus refits, from one Gram matrix.

    Args:
        alphas: The alpha grid.
        device: torch device of the arithmetic (``cpu`` by default).

    """

    def __init__(self, alphas: Sequence[float] = RIDGE_ALPHAS, device: str | torch.device | None = None,
                 num_threads: int | None = 1) -> None:
        self.alphas = tuple(float(a) for a in alphas)
        self.device = _device(device)
        self.num_threads = num_threads

    def fit(self, x: np.ndarray, y: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]]) -> RidgeCV:
        """Statistics of every part, and per inner fold the validation predictions of every alpha."""
        with torch_threads(self.num_threads):
            return self._fit(x, y, folds)

    def _fit(self, x: np.ndarray, y: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]]) -> RidgeCV:
        y2, self._squeeze = _targets(y)
        xt = torch.as_tensor(np.asarray(x, dtype=np.float64), device=self.device)
        yt = torch.as_tensor(y2, device=self.device)
        offset = xt.mean(0)
        x0 = xt - offset
        self._y_offset = yt.mean(0)
        y0 = yt - self._y_offset
        val_idx = [torch.as_tensor(va, device=self.device, dtype=torch.long) for _, va in folds]
        chunks = [x0[i] for i in val_idx] if _is_partition(folds, len(x0)) else None
        parts, total, grams = part_statistics(x0, folds, offset, gram=True, chunks=chunks)
        assert total is not None
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
            return self._refit(alpha)

    def _refit(self, alpha: float) -> RidgeModel:
        g, xy, sy = self._total
        p = len(self._parts.n) - 1
        a, b, ybar = self._system(g, xy, sy, p)
        a = a + alpha * torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
        coef = torch.cholesky_solve(b, torch.linalg.cholesky(a))
        parts = self._parts
        return RidgeModel((parts.mean[p] + parts.offset).cpu().numpy(), parts.scale[p].cpu().numpy(),
                          coef.cpu().numpy(), (ybar + self._y_offset).cpu().numpy(), self._squeeze)


class RidgeGrid:
    """Standardise-then-ridge for many alphas on one training set: a scikit-learn style estimator.

    After ``fit`` the estimator predicts with every alpha (``predict_all``) or with ``alpha``
    (``predict``). One eigendecomposition of the standardised Gram serves every alpha.

    Args:
        alphas: The alpha grid.
        alpha: Alpha used by ``predict``; defaults to the first of the grid.

    """

    def __init__(self, alphas: Sequence[float] = RIDGE_ALPHAS, alpha: float | None = None) -> None:
        self.alphas = alphas
        self.alpha = alpha

    def fit(self, x: np.ndarray, y: np.ndarray) -> RidgeGrid:
        """Keep the eigendecomposition of the standardised training matrix."""
        self._cv = RidgeCV(self.alphas).fit(x, y, [])
        g, xy, sy = self._cv._total
        a, b, ybar = self._cv._system(g, xy, sy, 0)
        lam, q = torch.linalg.eigh(a)
        alphas = torch.tensor(tuple(self.alphas), dtype=torch.float64)
        self.coefs_ = (q[None] @ ((q.T @ b)[None] / (lam[None, :, None] + alphas[:, None, None]))).numpy()
        parts = self._cv._parts
        self._mean = (parts.mean[0] + parts.offset).numpy()
        self._scale = parts.scale[0].numpy()
        self._intercept = (ybar + self._cv._y_offset).numpy()
        return self

    def predict_all(self, x: np.ndarray) -> np.ndarray:
        """Predictions for every alpha: ``[n_alpha, n]`` or ``[n_alpha, n, n_targets]``."""
        xs = (np.asarray(x, dtype=np.float64) - self._mean) / self._scale
        out = np.einsum("nf,aft->ant", xs, self.coefs_) + self._intercept
        return out[..., 0] if self._cv._squeeze else out

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions with the selected ``alpha``."""
        alpha = self.alphas[0] if self.alpha is None else self.alpha
        return self.predict_all(x)[list(self.alphas).index(alpha)]
