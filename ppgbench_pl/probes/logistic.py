"""The batched logistic-regression solver of the linear probe (``logistic_solver: batched``).

Every (C, inner-training part + the outer refit) problem of one outer fold is solved at once in torch (the
same code on a GPU when ``device`` is cuda), on scikit-learn's objective: mean log-loss + ||W||^2 / (2 C n),
intercept unpenalised, multinomial for more than two classes present, binary (one logit) for two. The
standardisation and the per-part sums are shared with ridge (:mod:`ppgbench_pl.probes.linear`). Two methods:

* ``sklearn`` (default): each problem replays scikit-learn's lbfgs at its defaults - scipy's L-BFGS-B from
  zero, its line search, its stops (max-abs gradient <= 1e-4, a relative decrease of 64 eps, 1,000
  iterations) - in float64 (:func:`lbfgs_like_sklearn`), so it takes the same iterations and lands on
  the same coefficients (to ~1e-10): the published solutions, hence the published selections. Only the
  arithmetic is shared: the products of all unfinished problems run as one batch per round, each
  problem on its own rows only (:class:`_ChunkedRows`).
* ``optimum``: every part of one C in one preconditioned L-BFGS to a gradient of 1e-8, warm-started along
  the C path; float32 products on the changes since a float64 reference point, float64 stopping test;
  finished problems leave the batch. Its C can differ from scikit-learn's where lbfgs stopped early.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from ppgbench_pl.probes.linear import (
    LOGISTIC_CS,
    SingleClassError,
    _device,
    _is_partition,
    part_statistics,
    torch_threads,
)
from ppgbench_pl.probes.logistic_objective import _ChunkedRows, _Problem
from ppgbench_pl.probes.logistic_optimum import _class_curvature, _lbfgs, _Preconditioned
from ppgbench_pl.probes.logistic_replay import (
    SKLEARN_FTOL,
    SKLEARN_HISTORY,
    SKLEARN_MAX_ITER,
    SKLEARN_MAXLS,
    SKLEARN_TOL,
    lbfgs_like_sklearn,
)

__all__ = ["LOGISTIC_MAX_ITER", "LOGISTIC_TOL", "SKLEARN_FTOL", "SKLEARN_HISTORY", "SKLEARN_MAXLS",
           "SKLEARN_MAX_ITER", "SKLEARN_TOL", "LogisticModel", "LogisticPath", "lbfgs_like_sklearn"]

#: Gradient tolerance (max-abs of the gradient of the mean objective) of the batched logistic solver;
#: scikit-learn stops at 1e-4, so we solve well past the point where its solution sits.
LOGISTIC_TOL = 1e-8
LOGISTIC_MAX_ITER = 5000


@dataclass
class LogisticModel:
    """A fitted standardise-then-logistic model; probabilities over ``classes`` (absent classes get 0)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # [d, K] (fixed and absent columns 0)
    intercept: np.ndarray  # [K]
    absent: np.ndarray  # [K] bool
    classes: np.ndarray

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Softmax over the present classes (binary: the sigmoid of the one free logit)."""
        z = ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef + self.intercept
        z = np.where(self.absent, -np.inf, z)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


class LogisticPath:
    """L2 logistic regression for every C on every part of one outer fold, batched (see module doc).

    Args:
        cs: The C grid.
        tol: Stop when the max-abs gradient of a part's mean objective is at most this (default: 1e-4,
            scikit-learn's, for ``sklearn``; 1e-8 for ``optimum``).
        max_iter: Iteration cap (per problem for ``sklearn``, default 1,000 as published; per C for
            ``optimum``).
        history: L-BFGS memory (10).
        single_class: ``error`` (as scikit-learn: a part with one class raises) or ``constant`` (such a
            part predicts its class with certainty).
        device: torch device (``cpu`` by default; cuda runs the same code).
        num_threads: torch CPU threads while solving (None: as configured; see :func:`torch_threads`).
        mixed: ``optimum`` only: run the early iterations with float32 row arithmetic, then polish in
            float64 (see :func:`_lbfgs`); the result is float64's to ``tol`` either way.
        active_set: ``optimum`` only: drop converged parts from the batch instead of carrying them frozen.
        method: ``sklearn`` (replay scikit-learn's lbfgs from zero for every problem: its solutions) or
            ``optimum`` (solve to ``tol`` along the C path, warm-started, preconditioned).
        chunked: ``sklearn`` with partitioning folds: each problem's products over its own rows only
            (:class:`_ChunkedRows`) rather than over all rows with weights.

    """

    def __init__(self, cs: Sequence[float] = LOGISTIC_CS, tol: float | None = None,
                 max_iter: int | None = None, history: int | None = None, single_class: str = "error",
                 device: str | torch.device | None = None, num_threads: int | None = 1, mixed: bool = True,
                 active_set: bool = True, method: str = "sklearn", chunked: bool = True) -> None:
        if method not in ("sklearn", "optimum"):
            raise ValueError(f"method must be 'sklearn' or 'optimum', got {method!r}")
        self.method, self.chunked = method, chunked
        if method == "sklearn":
            tol = SKLEARN_TOL if tol is None else tol
            max_iter = SKLEARN_MAX_ITER if max_iter is None else max_iter
            history = SKLEARN_HISTORY if history is None else history
        self.num_threads = num_threads
        self.mixed, self.active_set = mixed, active_set
        if single_class not in ("error", "constant"):
            raise ValueError(f"single_class must be 'error' or 'constant', got {single_class!r}")
        self.cs = tuple(float(c) for c in cs)
        self.tol = LOGISTIC_TOL if tol is None else tol
        self.max_iter = LOGISTIC_MAX_ITER if max_iter is None else max_iter
        self.history = 10 if history is None else history
        self.single_class = single_class
        self.device = _device(device)

    def fit(self, x: np.ndarray, y: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]],
            classes: np.ndarray) -> LogisticPath:
        """Solve every (C, part); parts are the inner-training parts of ``folds`` and then all rows."""
        with torch_threads(self.num_threads):
            return self._fit(x, y, folds, classes)

    def _fit(self, x: np.ndarray, y: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]],
             classes: np.ndarray) -> LogisticPath:
        dev = self.device
        self.classes = np.asarray(classes)
        codes = np.searchsorted(self.classes, y)
        xt = torch.as_tensor(np.asarray(x, dtype=np.float64), device=dev)
        offset = xt.mean(0)
        x0 = xt - offset
        parts, _, _ = part_statistics(x0, folds, offset)
        n_rows, d = x0.shape
        k = len(self.classes)
        train_rows = [*(tr for tr, _ in folds), np.arange(n_rows)]
        n_parts = len(train_rows)
        present = np.zeros((n_parts, k), dtype=bool)
        for p, tr in enumerate(train_rows):
            present[p, np.unique(codes[tr])] = True
        counts = present.sum(axis=1)
        single = counts < 2
        if single.any() and self.single_class == "error":
            p = int(np.flatnonzero(single)[0])
            which = "the outer-training part" if p == n_parts - 1 else f"inner training part {p + 1}"
            label = self.classes[present[p]][0] if counts[p] else "none"
            raise SingleClassError(f"{which} holds a single class ({label}); logistic regression needs "
                                   "samples of at least 2 classes (as scikit-learn)")
        # free logit columns: every present class (multinomial), or the second present class (binary)
        free = present.copy()
        for p in range(n_parts):
            if counts[p] == 2:
                free[p, np.flatnonzero(present[p])[0]] = False
            elif counts[p] < 2:
                free[p] = False
        self._parts, self._present, self._free, self._single = parts, present, free, single
        self._x0, self._offset = x0, offset
        self._by_c: dict[float, torch.Tensor] = {}
        self._cv: dict[float, list[np.ndarray]] | None = None
        self._folds = folds
        grid = sorted(set(self.cs))
        free_t, absent_t = torch.as_tensor(free, device=dev), torch.as_tensor(~present, device=dev)
        if self.method == "sklearn" and self.chunked and folds and _is_partition(folds, n_rows):
            chunked = _ChunkedRows(x0, codes, folds, parts, free_t, absent_t, k)
            self._solve_like_sklearn(chunked.loss_grad, grid, n_parts, d, k)
            return self
        mask = torch.zeros(n_parts, n_rows, dtype=torch.float64, device=dev)  # all-rows objectives only
        for p, tr in enumerate(train_rows):
            mask[p, torch.as_tensor(tr, device=dev, dtype=torch.long)] = 1.0
        onehot = torch.zeros(n_rows, k, dtype=torch.float64, device=dev)
        onehot[torch.arange(n_rows, device=dev), torch.as_tensor(codes, device=dev)] = 1.0
        problem = _Problem(x0, onehot, mask, parts, free_t, absent_t)
        if self.method == "sklearn":
            self._solve_like_sklearn(partial(problem.loss_grad, cache=False), grid, n_parts, d, k)
            return self
        theta = torch.zeros(n_parts, d + 1, k, dtype=torch.float64, device=dev)
        n_all, mu, sc = parts.n[-1], parts.mean[-1], parts.scale[-1]
        cov = (x0.T @ x0 / n_all - torch.outer(mu, mu)) / torch.outer(sc, sc)
        basis = torch.linalg.eigh(cov)
        class_basis = _class_curvature(onehot, mask, problem.free)
        self.solutions_: list[torch.Tensor] = []
        self.n_iter_: list[int] = []
        for c in grid:
            scaled = _Preconditioned(problem, c, basis, class_basis)
            u, iters = _lbfgs(scaled, scaled.to_u(theta), self.tol, self.max_iter, self.history,
                              mixed=self.mixed, active_set=self.active_set)
            theta = scaled.to_theta(u)
            self.solutions_.append(theta.clone())
            self.n_iter_.append(iters)
        self._by_c = {c: self.solutions_[grid.index(c)] for c in self.cs}
        return self

    def _solve_like_sklearn(self, loss_grad: Callable[..., tuple[torch.Tensor, torch.Tensor]], grid: list[float],
                            n_parts: int, d: int, k: int) -> None:
        """Every (C, part) from zero along scikit-learn's own lbfgs path (:func:`lbfgs_like_sklearn`).

        ``loss_grad(theta [A, d+1, K], C [A], part ids [A]) -> (f, g)`` is the batched objective.
        """
        dev = self.device
        part_of = torch.arange(n_parts, device=dev).repeat(len(grid))
        c_of = torch.as_tensor(grid, dtype=torch.float64, device=dev).repeat_interleave(n_parts)

        def evaluate(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            f, g = loss_grad(x.view(len(ids), d + 1, k), c_of[ids], part_of[ids])
            return f, g.reshape(len(ids), -1)

        x0 = torch.zeros(len(grid) * n_parts, (d + 1) * k, dtype=torch.float64, device=dev)
        x, iters = lbfgs_like_sklearn(evaluate, x0, self.tol, self.max_iter, self.history)
        theta = x.view(len(grid), n_parts, d + 1, k)
        self.solutions_ = [theta[g].clone() for g in range(len(grid))]
        self.iterations_ = iters.reshape(len(grid), n_parts)
        self.n_iter_ = [int(i) for i in self.iterations_.max(axis=1)]
        self._by_c = {c: self.solutions_[grid.index(c)] for c in self.cs}

    def model(self, c: float, part: int = -1) -> LogisticModel:
        """The fitted model of one C on one part (default: all rows, i.e. the refit)."""
        theta = self._by_c[float(c)]
        p = part % theta.shape[0]
        mean = (self._parts.mean[p] + self._offset).cpu().numpy()
        scale = self._parts.scale[p].cpu().numpy()
        w = theta[p].cpu().numpy()
        if self._single[p]:  # constant switch: certainty for the one class seen
            coef = np.zeros_like(w[:-1])
            intercept = np.where(self._present[p], 0.0, -np.inf)
            return LogisticModel(mean, scale, coef, intercept, ~self._present[p], self.classes)
        return LogisticModel(mean, scale, w[:-1], w[-1], ~self._present[p], self.classes)

    def cv_proba(self, c: float) -> list[np.ndarray]:
        """Per inner fold: probabilities of its validation rows under its own fit at ``c``.

        Computed for every C at once on the first call (one product per fold), as :meth:`model` would.
        """
        if self._cv is None:
            grid = sorted(self._by_c)
            thetas = torch.stack([self._by_c[g] for g in grid])  # [G, P, d+1, K]
            self._cv = {g: [] for g in grid}
            for p, (_, va) in enumerate(self._folds):
                rows = self._x0[torch.as_tensor(va, device=self.device, dtype=torch.long)]
                theta = thetas[:, p]
                w = theta[:, :-1] / self._parts.scale[p][None, :, None]  # [G, d, K]
                b = theta[:, -1] - torch.einsum("d,gdk->gk", self._parts.mean[p], w)
                z = (rows @ w.permute(1, 0, 2).reshape(w.shape[1], -1)).view(len(rows), *b.shape) + b
                z = z.masked_fill(torch.as_tensor(~self._present[p], device=self.device), float("-inf"))
                prob = torch.softmax(z, -1).cpu().numpy()
                for i, g in enumerate(grid):
                    self._cv[g].append(prob[:, i])
        return self._cv[float(c)]
