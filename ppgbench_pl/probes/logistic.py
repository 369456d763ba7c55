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
from typing import Any

import numpy as np
import torch

from ppgbench_pl.probes.linear import (
    LOGISTIC_CS,
    Parts,
    SingleClassError,
    _device,
    _is_partition,
    part_statistics,
    torch_threads,
)

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
        mask = torch.zeros(n_parts, n_rows, dtype=torch.float64, device=dev)
        present = np.zeros((n_parts, k), dtype=bool)
        for p, tr in enumerate(train_rows):
            mask[p, torch.as_tensor(tr, device=dev, dtype=torch.long)] = 1.0
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


@dataclass
class _Problem:
    """The batched objective: parts share the rows ``x0`` and differ by mask, standardisation, classes."""

    x0: torch.Tensor  # [n, d]
    onehot: torch.Tensor  # [n, K]
    mask: torch.Tensor  # [P, n]
    parts: Parts
    free: torch.Tensor  # [P, K] bool: logit columns that are parameters
    absent: torch.Tensor  # [P, K] bool: classes not in the part (logit -inf)

    def __post_init__(self) -> None:
        # Rows last everywhere ([P, K, n]): the per-row softmax then runs over long contiguous rows.
        self.x0t = self.x0.T.contiguous()  # [d, n]
        self.onehot_t = self.onehot.T.contiguous()  # [K, n]
        self.codes = self.onehot.argmax(1)[None, None, :]  # [1, 1, n]
        self.weight = (self.mask / self.parts.n[:, None]).contiguous()  # [P, n]: 1/n_p on the part's rows
        self.free_f = self.free.to(torch.float64)[:, None, :]  # [P, 1, K]
        # absent classes: a finite huge negative logit (-inf would make 0 * inf = nan on rows outside a
        # part whose label is that class)
        self.neg = self.absent.to(torch.float64)  # [P, K]: scaled per dtype in _subset
        self._data: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {
            torch.float64: (self.x0t, self.x0)}
        self._subsets: dict[tuple[tuple[int, ...], torch.dtype], tuple[torch.Tensor, ...]] = {}
        self._reference: tuple[torch.Tensor, ...] = ()

    def _subset(self, idx: torch.Tensor | None, dtype: torch.dtype, cache: bool = True) -> tuple[torch.Tensor, ...]:
        """Per-part constants of the parts ``idx`` (None: all; repeats allowed), row-sized ones in ``dtype``."""
        key = (tuple(idx.tolist()) if idx is not None else (), dtype)
        if key not in self._subsets or not cache:
            sel = idx if idx is not None else slice(None)
            p = self.parts
            weight = self.weight[sel]
            onehot_w = (self.onehot_t[None] * weight[:, None, :]).to(dtype)
            neg = (self.neg[sel] * (-1e300 if dtype == torch.float64 else -1e30)).to(dtype)
            out = (p.n[sel], p.mean[sel], p.scale[sel], neg, weight.to(dtype), onehot_w, self.free_f[sel])
            if not cache:
                return out
            self._subsets[key] = out
        return self._subsets[key]

    def data(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(x0^T, x0) in ``dtype`` (float32 copies made once, for the early iterations)."""
        if dtype not in self._data:
            self._data[dtype] = (self.x0t.to(dtype), self.x0.to(dtype))
        return self._data[dtype]

    def loss_grad(self, theta: torch.Tensor, c: float | torch.Tensor, idx: torch.Tensor | None = None,
                  dtype: torch.dtype = torch.float64, set_reference: bool = False,
                  cache: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Per part: sklearn's mean objective and its gradient; theta is [A, d+1, K] (last row: intercept).

        ``idx`` names the parts theta holds (None: all). float64: exact; ``set_reference`` (all parts)
        keeps the logits, residuals and gradient products of this point. float32: the two products with
        the rows are taken of the *changes* since the reference point only, in float32 (half the cost),
        and added to the reference's float64 ones; the softmax stays float64. The rounding error is then
        ~1e-7 of the change since the reference, so with a reference refreshed as the gradient falls
        (:func:`_lbfgs`) the float32 products converge as far as float64 ones. The objective is only
        computed in float64 (NaN otherwise: the mixed rounds do not read it).
        """
        n, mean, scale, neg, weight, onehot_w, free_f = self._subset(idx, torch.float64, cache)
        n_parts, d1, k = theta.shape
        w, b = theta[:, :-1, :], theta[:, -1, :]
        w_eff = w / scale[:, :, None]  # [A, d, K]
        b_eff = b - torch.einsum("pd,pdk->pk", mean, w_eff) + neg
        lhs = w_eff.transpose(1, 2).reshape(n_parts * k, d1 - 1)
        if dtype == torch.float64:
            z_lin = (lhs @ self.x0t).view(n_parts, k, -1)  # [A, K, n]
        else:
            ref = self._reference
            sel = idx if idx is not None else slice(None)
            x0t32, _ = self.data(torch.float32)
            dl = (lhs - ref[0][sel].reshape(n_parts * k, d1 - 1)).to(torch.float32)
            z_lin = ref[1][sel] + (dl @ x0t32).view(n_parts, k, -1).to(torch.float64)
        z = z_lin + b_eff[:, :, None]
        z = z - z.amax(1, keepdim=True)
        e = torch.exp(z)
        total = e.sum(1)  # [A, n]
        penalty = 0.5 / (c * n)
        if dtype == torch.float64:
            # mean log-loss: sum_i w_i (log total_i - z_true_i), with z shifted by its row max
            z_true = torch.gather(z, 1, self.codes.expand(n_parts, 1, -1))[:, 0]
            loss = ((torch.log(total) - z_true) * weight).sum(1) + penalty * (w * w).sum((1, 2))
        else:  # the mixed rounds' line search reads derivatives only
            loss = torch.full((n_parts,), float("nan"), dtype=torch.float64, device=theta.device)
        r = torch.addcmul(-onehot_w, e, (weight / total)[:, None, :])  # [A, K, n]: w_i (p_i - y_i)
        if dtype == torch.float64:
            rx = (r.view(n_parts * k, -1) @ self.x0).view(n_parts, k, d1 - 1)
            if set_reference:
                self._reference = (lhs.view(n_parts, k, -1).clone(), z_lin, r, rx)
        else:
            _, x0_32 = self.data(torch.float32)
            dr = (r - ref[2][sel]).view(n_parts * k, -1).to(torch.float32)
            rx = ref[3][sel] + (dr @ x0_32).view(n_parts, k, d1 - 1).to(torch.float64)
        g_eff = rx.transpose(1, 2)
        gb = r.sum(2)  # [A, K]
        gw = (g_eff - mean[:, :, None] * gb[:, None, :]) / scale[:, :, None]
        gw = gw + 2.0 * penalty[:, None, None] * w
        grad = torch.cat([gw, gb[:, None, :]], dim=1) * free_f
        return loss, grad


class _ChunkedRows:
    """The float64 objective of many (C, part) problems, with each part's rows taken as whole chunks.

    When the inner validation chunks partition the rows, inner part ``p`` is every chunk but ``p`` and the
    refit part is all of them: products run chunk by chunk over the problems whose part holds the chunk,
    so no problem computes rows outside its part. The softmax depends on logit differences only, so the
    products are taken against a reference class (the part's first present class): K - 1 columns each
    way, the reference's gradient columns following from the probabilities summing to one (for two
    classes, one product each way). The rows carry a constant 1 (the intercept rides in the products),
    the class sums of the rows give the true-class logits and the label term of the gradient without
    per-row gathers, and each part's weight 1/n is a scalar per problem.
    """

    def __init__(self, x0: torch.Tensor, codes: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]],
                 parts: Parts, free: torch.Tensor, absent: torch.Tensor, k: int) -> None:
        dev = x0.device
        ones = torch.ones(len(x0), 1, dtype=x0.dtype, device=dev)
        x1 = torch.cat([x0, ones], 1)  # [n, d+1]
        self.chunks = [x1[torch.as_tensor(va, device=dev, dtype=torch.long)].contiguous() for _, va in folds]
        onehot = torch.eye(k, dtype=x0.dtype, device=dev)
        # per part: [K, d+1] class sums of its rows (last column: the class counts); part j < F lacks chunk j
        sums = torch.stack([onehot[torch.as_tensor(codes[va], device=dev)].T @ c
                            for (_, va), c in zip(folds, self.chunks, strict=True)])
        self.label_sums = torch.cat([sums.sum(0) - sums, sums.sum(0)[None]])
        self.row_sums = self.label_sums.sum(1)  # [P, d+1]
        self.parts, self.free_f = parts, free.to(x0.dtype)[:, None, :]
        self.neg = absent.to(x0.dtype) * -1e300
        self.n_folds = len(folds)
        # class order per part: the reference (first present class) first
        present = (~absent).cpu().numpy()
        ref = present.argmax(1)
        perm = np.array([[r, *[c for c in range(k) if c != r]] for r in ref])
        self.perm = torch.as_tensor(perm, device=dev)
        self._sel: dict[bytes, tuple[list[torch.Tensor | None], tuple[torch.Tensor, ...]]] = {}

    def _batch(self, pid: torch.Tensor) -> tuple[list[torch.Tensor | None], tuple[torch.Tensor, ...]]:
        """Per chunk the problems whose part holds it (None: all; empty: none), and per-problem constants.

        The constants: n, mean, scale, absent logits, class order, row sums, label sums, free columns.
        Cached: a batch only changes when problems finish.
        """
        pid_np = pid.cpu().numpy()
        key = pid_np.tobytes()
        if key not in self._sel:
            sels: list[torch.Tensor | None] = []
            for j in range(self.n_folds):
                holds = pid_np != j  # inner part j is every chunk but j; the refit part holds all
                sels.append(None if holds.all() else torch.as_tensor(np.flatnonzero(holds), device=pid.device))
            p = self.parts
            constants = (p.n[pid], p.mean[pid], p.scale[pid], self.neg[pid], self.perm[pid], self.row_sums[pid],
                         self.label_sums[pid], self.free_f[pid])
            if len(self._sel) > 64:
                self._sel.clear()
            self._sel[key] = (sels, constants)
        return self._sel[key]

    def loss_grad(self, theta: torch.Tensor, c: torch.Tensor,
                  pid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per problem: scikit-learn's mean objective and gradient; theta [A, d+1, K], C [A], part ids [A]."""
        n_prob, d1, k = theta.shape
        sels, constants = self._batch(pid)
        n, mean, scale, neg, perm, rows, label_sums, _ = constants
        w, b = theta[:, :-1, :], theta[:, -1, :]
        w_eff = w / scale[:, :, None]
        b_eff = b - torch.einsum("pd,pdk->pk", mean, w_eff) + neg
        lhs = torch.cat([w_eff, b_eff[:, None, :]], 1).transpose(1, 2)  # [A, K, d+1]
        lhs_p = lhs.gather(1, perm[:, :, None].expand(-1, -1, d1))
        diff = (lhs_p[:, 1:] - lhs_p[:, :1]).contiguous()  # [A, K-1, d+1]: logits minus the reference's
        if not bool(theta.any()):  # the start: uniform over the present classes, no products needed
            present = (neg == 0).to(theta.dtype)
            n_present = present.sum(1)
            lse = n * torch.log(n_present)
            rx = rows[:, None, :] * (present / n_present[:, None])[:, :, None]
            return self._finish(theta, c, pid, lse, rx, torch.zeros_like(lse))
        lse = torch.zeros(n_prob, dtype=theta.dtype, device=theta.device)
        rx = torch.zeros(n_prob, k - 1, d1, dtype=theta.dtype, device=theta.device)
        for j, sel in enumerate(sels):
            if sel is not None and len(sel) == 0:
                continue
            part = (diff if sel is None else diff[sel]).transpose(0, 1).reshape(-1, d1)  # class-major
            a = len(part) // (k - 1)
            # both products read the chunk in one layout: z [n_j, K-1, a], then prob^T @ chunk
            z = (self.chunks[j] @ part.T).view(-1, k - 1, a)
            e = torch.exp(z)  # the reference's logit is 0: total = 1 + sum of exp
            total = e.sum(1) + 1.0
            if bool(torch.isinf(total).any()):  # a logit past exp's range: shift by the row max
                top = z.amax(1).clamp(min=0.0)
                e = torch.exp(z - top[:, None])
                total = e.sum(1) + torch.exp(-top)
                chunk_lse = (torch.log(total) + top).sum(0)
            else:
                chunk_lse = torch.log(total).sum(0)
            prob = e * (1.0 / total)[:, None]
            prx = (prob.view(len(z), -1).T @ self.chunks[j]).view(k - 1, a, d1).transpose(0, 1)
            if sel is None:
                lse += chunk_lse
                rx += prx
            else:
                lse.index_add_(0, sel, chunk_lse)
                rx.index_add_(0, sel, prx)
        rx_p = torch.cat([(rows - rx.sum(1))[:, None], rx], 1)  # probabilities sum to one
        rx = torch.zeros_like(rx_p).scatter(1, perm[:, :, None].expand(-1, -1, d1), rx_p)
        # true-class logits relative to the reference class, as the log-sum-exp is
        true_logits = (lhs * label_sums).sum((1, 2)) - (lhs_p[:, 0] * rows).sum(1)
        return self._finish(theta, c, pid, lse, rx, true_logits)

    def _finish(self, theta: torch.Tensor, c: torch.Tensor, pid: torch.Tensor, lse: torch.Tensor,
                rx: torch.Tensor, true_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Objective and gradient from the row sums: log-sum-exp [A], probability-weighted rows [A, K, d+1]."""
        n, mean, scale, _, _, _, label_sums, free_f = self._batch(pid)[1]
        w, inv_n = theta[:, :-1, :], 1.0 / n
        penalty = 0.5 / (c * n)
        # mean log-loss: (sum of log-sum-exp - sum of true-class logits) / n
        loss = (lse - true_logits) * inv_n + penalty * (w * w).sum((1, 2))
        g_full = (rx - label_sums) * inv_n[:, None, None]  # [A, K, d+1]: d/d(w_eff, b_eff)
        gb = g_full[:, :, -1]
        gw = (g_full[:, :, :-1].transpose(1, 2) - mean[:, :, None] * gb[:, None, :]) / scale[:, :, None]
        gw = gw + 2.0 * penalty[:, None, None] * w
        grad = torch.cat([gw, gb[:, None, :]], dim=1) * free_f
        return loss, grad


class _Preconditioned:
    """The objective in rotated, rescaled variables in which its Hessian is close to the identity.

    The loss Hessian in W is about ``S kron cov``: ``cov`` the covariance of the standardised rows and
    ``S = diag(pi) - pi pi^T`` the softmax curvature at the class shares ``pi`` (``pi (1 - pi)`` for one
    free logit), plus the ridge ``I / (C n)``. With ``cov = Q diag(lam) Q^T`` (from all rows, shared by
    the parts) and ``S = V diag(sig) V^T`` (per part, over its free classes), the variables
    ``U = sqrt(sig lam + ridge) * (Q^T W V)`` see unit curvature everywhere, including the direction
    (all class columns moved together) that only the ridge term pins down. The intercept row is left as
    is; stopping still uses the gradient in the original W.
    """

    def __init__(self, problem: _Problem, c: float, basis: tuple[torch.Tensor, torch.Tensor],
                 classes: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.problem, self.c = problem, c
        lam, self.q = basis
        sig, self.v = classes  # [P, K], [P, K, K]
        ridge = 1.0 / (c * problem.parts.n)  # [P]
        curvature = torch.clamp(sig[:, None, :] * lam[None, :, None], min=0.0)
        self.scale = torch.sqrt(curvature + ridge[:, None, None])
        self.q_t = self.q.T.contiguous()
        self.free_f = problem.free_f
        self.n_parts = len(problem.parts.n)

    def _left(self, m: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """M @ w for every part: w is [P, d, K]."""
        n_parts, d, k = w.shape
        return (m @ w.permute(1, 0, 2).reshape(d, n_parts * k)).view(d, n_parts, k).permute(1, 0, 2)

    def _sel(self, idx: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.scale, self.v) if idx is None else (self.scale[idx], self.v[idx])

    def to_u(self, theta: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        """U = scale * (Q^T W V) (intercept unchanged)."""
        scale, v = self._sel(idx)
        u = self._left(self.q_t, theta[:, :-1]) @ v * scale
        return torch.cat([u, theta[:, -1:]], dim=1)

    def to_theta(self, u: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        """W = Q (U / scale) V^T."""
        scale, v = self._sel(idx)
        w = self._left(self.q, (u[:, :-1] / scale) @ v.transpose(1, 2))
        return torch.cat([w, u[:, -1:]], dim=1)

    def loss_grad(self, u: torch.Tensor, idx: torch.Tensor | None = None, dtype: torch.dtype = torch.float64,
                  set_reference: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(objective, gradient in U, max-abs gradient in W) of the parts ``idx`` (None: all)."""
        scale, v = self._sel(idx)
        f, g = self.problem.loss_grad(self.to_theta(u, idx), self.c, idx, dtype, set_reference)
        gu = self._left(self.q_t, g[:, :-1]) @ v / scale
        return f, torch.cat([gu, g[:, -1:]], dim=1), g.abs().amax((1, 2))


def _class_curvature(onehot: torch.Tensor, mask: torch.Tensor,
                     free: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per part: eigenvalues [P, K] and vectors [P, K, K] of the softmax curvature at the class shares.

    Only the free classes enter (block-diagonal: fixed or absent classes keep an identity block, so they
    stay fixed). One free logit (binary): pi (1 - pi) of the positive class.
    """
    n_parts, k = free.shape
    counts = mask @ onehot  # [P, K]
    sig = torch.ones(n_parts, k, dtype=onehot.dtype, device=onehot.device)
    v = torch.eye(k, dtype=onehot.dtype, device=onehot.device).repeat(n_parts, 1, 1)
    for p in range(n_parts):
        idx = torch.nonzero(free[p]).flatten()
        if len(idx) == 0:
            continue
        if len(idx) == 1:
            share = counts[p, idx[0]] / counts[p].sum()
            sig[p, idx[0]] = share * (1 - share)
            continue
        share = counts[p, idx] / counts[p, idx].sum()
        s_mat = torch.diag(share) - torch.outer(share, share)
        e, vec = torch.linalg.eigh(s_mat)
        sig[p, idx] = torch.clamp(e, min=0.0)
        v[p][idx[:, None], idx[None, :]] = vec
    return sig, v


#: A mixed-precision round (float32 products of the changes since a float64 reference) ends when every
#: part's gradient fell by this factor from the reference; then a float64 evaluation sets the next one.
MIXED_DROP = 1e-2
#: A part leaves a mixed-precision round when its gradient has not halved in this many iterations.
MIXED_PATIENCE = 20


def _lbfgs(problem: _Preconditioned, theta: torch.Tensor, tol: float, max_iter: int, history: int,
           mixed: bool = True, active_set: bool = True) -> tuple[torch.Tensor, int]:
    """Batched L-BFGS (compact form, per-problem memory); optionally mixed precision and an active set.

    The inverse-Hessian product uses the compact representation of Byrd, Nocedal and Schnabel, so one
    iteration is a fixed, small number of batched tensor operations whatever the memory length.

    ``mixed``: rounds of float32 products (see :meth:`_Problem.loss_grad`), each from a float64
    reference point until the gradient fell by :data:`MIXED_DROP`, with a line search on the directional
    derivative (which the float32 products resolve where differences of the objective are not); every
    round starts with an exact float64 evaluation, which is also the stopping test, so the result is
    float64's to ``tol``; rounds that stop helping hand over to plain float64 iterations with
    backtracking Armijo. ``active_set``: a converged part leaves the batch (its rows of the products
    are no longer computed); otherwise it stays in, frozen.
    """
    n_parts = theta.shape[0]
    shape = theta.shape
    x = theta.reshape(n_parts, -1).clone()
    state = _State(problem, x, shape, history)
    it = 0
    if mixed:
        previous = None
        while it < max_iter:
            exact = state._eval(state.x, None, torch.float64, set_reference=True)
            todo = exact[2] > tol
            if not bool(todo.any()):
                return state.x.view(shape), it
            if previous is not None and not bool((exact[2][todo] < 0.5 * previous[todo]).all()):
                break  # a round that did not halve a gradient: float64 from here
            previous = exact[2]
            target = torch.clamp(exact[2] * MIXED_DROP, min=tol)
            it += state.run(target, max_iter - it, torch.float32, active_set, start=exact)
    it += state.run(torch.full((n_parts,), tol, dtype=x.dtype, device=x.device), max_iter - it,
                    torch.float64, active_set)
    return state.x.view(shape), it


class _State:
    """Per-part iterate, gradient and memory of :func:`_lbfgs`, kept over its precision phases."""

    def __init__(self, problem: _Preconditioned, x: torch.Tensor, shape: torch.Size, history: int) -> None:
        self.problem, self.x, self.shape, self.history = problem, x, shape, history
        n_parts, q = x.shape
        self.free = problem.free_f.expand(-1, shape[1], -1).reshape(n_parts, -1)
        self.s_mem = torch.zeros(n_parts, 0, q, dtype=x.dtype, device=x.device)
        self.y_mem = torch.zeros_like(self.s_mem)
        self.gamma = torch.ones(n_parts, dtype=x.dtype, device=x.device)

    def _eval(self, x: torch.Tensor, idx: torch.Tensor | None, dtype: torch.dtype,
              set_reference: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        shape = (x.shape[0], *self.shape[1:])
        f, g, gmax = self.problem.loss_grad(x.view(shape), idx, dtype, set_reference)
        return f, g.reshape(x.shape[0], -1), gmax

    def run(self, tol: torch.Tensor, max_iter: int, dtype: torch.dtype, active_set: bool,
            start: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> int:
        """Iterate until each part's max-abs gradient is below its ``tol`` (or it stalls); returns iterations.

        ``start``: (f, g, gmax) at the current point, when known.
        """
        f, g, gmax = self._eval(self.x, None, dtype) if start is None else start
        active = gmax > tol
        derivative_search = dtype != torch.float64
        n_parts = len(active)
        # the batch: every part (frozen when done), or only the active ones (compacted as they finish)
        ids = torch.nonzero(active).flatten() if active_set else torch.arange(n_parts, device=active.device)
        idx = None if len(ids) == n_parts else ids
        x, fa, ga, ga_max, on = self.x[ids], f[ids], g[ids], gmax[ids], active[ids]
        s_mem, y_mem, gamma, free, tol = self.s_mem[ids], self.y_mem[ids], self.gamma[ids], self.free[ids], tol[ids]
        best, since = ga_max.clone(), torch.zeros_like(ga_max)
        it = 0
        while bool(on.any()) and it < max_iter:
            it += 1
            direction = -_compact_product(s_mem, y_mem, gamma, ga) if s_mem.shape[1] else -ga
            direction = direction * free
            slope = (ga * direction).sum(1)
            bad = slope >= 0
            direction = torch.where(bad[:, None], -ga, direction)
            slope = torch.where(bad, -(ga * ga).sum(1), slope)
            if s_mem.shape[1]:
                t = torch.ones_like(slope)
            else:
                t = torch.clamp(1.0 / ga.abs().amax(1).clamp(min=1e-300), max=1.0)
            t = torch.where(on, t, torch.zeros_like(t))
            pending = on.clone()
            f_new, g_new, x_new, gmax_new = fa, ga, x, ga_max
            for _ in range(60):
                trial = x + t[:, None] * direction
                ft, gt, gmt = self._eval(trial, idx, dtype)
                if derivative_search:
                    # convex along the line: phi'(t) <= |phi'(0)| / 2 bounds the overshoot (a quadratic
                    # then decreases by >= t |phi'(0)| / 4); a rejected t moves to the secant root
                    dphi = (gt * direction).sum(1)
                    ok = pending & (dphi <= -0.5 * slope)
                    shrink = torch.clamp(-slope / (dphi - slope).clamp(min=1e-300), min=0.1, max=0.7)
                else:
                    ok = pending & (ft <= fa + 1e-4 * t * slope)
                    shrink = torch.full_like(t, 0.5)
                f_new = torch.where(ok, ft, f_new)
                gmax_new = torch.where(ok, gmt, gmax_new)
                g_new = torch.where(ok[:, None], gt, g_new)
                x_new = torch.where(ok[:, None], trial, x_new)
                pending = pending & ~ok
                if not bool(pending.any()):
                    break
                t = torch.where(pending, t * shrink, t)
            stalled = pending  # no acceptable step at this precision: as converged as it allows
            step, dg = x_new - x, g_new - ga
            s_mem, y_mem, gamma = _remember(s_mem, y_mem, gamma, step, dg, on, free, self.history)
            on = on & ~stalled & (gmax_new > tol)
            if derivative_search:  # progress limited by the reference's distance: end the round
                better = gmax_new < 0.5 * best
                best = torch.where(better, gmax_new, best)
                since = torch.where(better, 0.0, since + 1)
                on = on & (since <= MIXED_PATIENCE)
            else:
                small_change = (fa - f_new).abs() <= 1e-15 * torch.clamp(fa.abs(), min=1.0)
                on = on & ~(small_change & (gmax_new < 1e-6))
            x, fa, ga, ga_max = x_new, f_new, g_new, gmax_new
            if active_set and not bool(on.all()):  # finished parts leave the batch
                self._store(ids, x, s_mem, y_mem, gamma)
                keep = on
                ids, x, fa, ga, ga_max, on = ids[keep], x[keep], fa[keep], ga[keep], ga_max[keep], on[keep]
                s_mem, y_mem, gamma, free, tol = s_mem[keep], y_mem[keep], gamma[keep], free[keep], tol[keep]
                best, since, idx = best[keep], since[keep], ids
        self._store(ids, x, s_mem, y_mem, gamma)
        return it

    def _store(self, ids: torch.Tensor, x: torch.Tensor, s_mem: torch.Tensor, y_mem: torch.Tensor,
               gamma: torch.Tensor) -> None:
        """Write the batch's iterates and memories back to the parts ``ids``."""
        if len(ids) == len(self.x):
            self.x, self.s_mem, self.y_mem, self.gamma = x, s_mem, y_mem, gamma
            return
        self.x[ids] = x
        if s_mem.shape[1] != self.s_mem.shape[1]:  # memory grew or was reset: resize every part's
            self.s_mem = _resized(self.s_mem, s_mem.shape[1], self.free)
            self.y_mem = _resized(self.y_mem, s_mem.shape[1], self.free)
        self.s_mem[ids], self.y_mem[ids], self.gamma[ids] = s_mem, y_mem, gamma


def _resized(mem: torch.Tensor, m: int, unit: torch.Tensor) -> torch.Tensor:
    """Memory with ``m`` slots for every part, of which only the active ones grew or were reset.

    New slots repeat the part's newest pair, or a unit pair (the preconditioned identity) when it has
    none: a BFGS update with a pair the memory already satisfies changes nothing, so a part that comes
    back in a later phase reads a valid memory.
    """
    if m <= mem.shape[1]:
        return mem[:, mem.shape[1] - m:].clone()
    newest = mem[:, -1:] if mem.shape[1] else unit[:, None]
    pad = newest.expand(-1, m - mem.shape[1], -1)
    return torch.cat([mem, pad], 1)


def _remember(s_mem: torch.Tensor, y_mem: torch.Tensor, gamma: torch.Tensor, step: torch.Tensor,
              dg: torch.Tensor, on: torch.Tensor, free: torch.Tensor,
              history: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Update the memory after one step: append the new pair (keep ``history``), or reset when needed."""
    sy = (step * dg).sum(1)
    valid = sy > 1e-12 * torch.sqrt((step * step).sum(1) * (dg * dg).sum(1)).clamp(min=1e-300)
    if bool(valid.all()):
        s_mem = torch.cat([s_mem, step[:, None]], 1)[:, -history:]
        y_mem = torch.cat([y_mem, dg[:, None]], 1)[:, -history:]
        return s_mem, y_mem, sy / (dg * dg).sum(1)
    if bool((valid | ~on).all()) and bool(valid.any()):
        # frozen problems repeat their last pair (or a unit pair) so every memory stays well defined
        step = torch.where(valid[:, None], step, s_mem[:, -1] if s_mem.shape[1] else free)
        dg = torch.where(valid[:, None], dg, y_mem[:, -1] if y_mem.shape[1] else free)
        s_mem = torch.cat([s_mem, step[:, None]], 1)[:, -history:]
        y_mem = torch.cat([y_mem, dg[:, None]], 1)[:, -history:]
        return s_mem, y_mem, torch.where(valid, sy / (dg * dg).sum(1).clamp(min=1e-300), gamma)
    # an active problem lost positive curvature (numerical): restart every memory
    return s_mem[:, :0], y_mem[:, :0], torch.ones_like(gamma)


def _compact_product(s: torch.Tensor, y: torch.Tensor, gamma: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """H v for the L-BFGS inverse Hessian H of memory (s, y) [P, m, q] and initial scale gamma [P]."""
    sty = s @ y.transpose(1, 2)  # [P, m, m]
    r = torch.triu(sty)
    d = torch.diagonal(sty, dim1=1, dim2=2)
    yty = y @ y.transpose(1, 2)
    a = (s @ v[:, :, None])  # [P, m, 1]
    b = gamma[:, None, None] * (y @ v[:, :, None])
    r_inv_a = torch.linalg.solve_triangular(r, a, upper=True)
    inner = (torch.diag_embed(d) + gamma[:, None, None] * yty) @ r_inv_a - b
    p1 = torch.linalg.solve_triangular(r.transpose(1, 2), inner, upper=False)
    p2 = -r_inv_a
    return (gamma[:, None] * v + (s.transpose(1, 2) @ p1)[:, :, 0]
            + gamma[:, None] * (y.transpose(1, 2) @ p2)[:, :, 0])


# ------------------------------------------------------------- scikit-learn's lbfgs, replicated and batched

#: scikit-learn's lbfgs settings (``LogisticRegression`` at its defaults, as the published probe runs it):
#: scipy's L-BFGS-B with 10 pairs of memory, at most 50 evaluations per line search, stopping on the max-abs
#: gradient (``tol``) or on a relative objective decrease of 64 machine epsilons (``ftol``).
SKLEARN_TOL, SKLEARN_MAX_ITER, SKLEARN_HISTORY, SKLEARN_MAXLS = 1e-4, 1000, 10, 50
SKLEARN_FTOL = 64 * float(np.finfo(np.float64).eps)
#: L-BFGS-B's line-search constants (sufficient decrease, curvature, interval width) and largest step.
_LS_FTOL, _LS_GTOL, _LS_XTOL, _LS_STPMAX = 1e-3, 0.9, 0.1, 1e10


class _MoreThuente:
    """One problem's Moré-Thuente line search as L-BFGS-B drives it: scipy's own ``DCSRCH``.

    scipy's L-BFGS-B (which scikit-learn's lbfgs calls) searches with MINPACK-2's ``dcsrch``; scipy ships
    the same search as a reverse-communication class, so the replay asks that class for its steps instead
    of re-implementing it, and takes exactly scipy's steps. Reverse communication: the caller evaluates
    :attr:`stp`, gives :meth:`step` the objective and directional derivative there, and gets the next step,
    or None when the search ended (the last evaluated step is then the accepted one).
    """

    def __init__(self, f: float, g: float, stp: float, stpmax: float = _LS_STPMAX) -> None:
        self._search = _dcsrch_class()(None, None, _LS_FTOL, _LS_GTOL, _LS_XTOL, 0.0, stpmax)
        self.stp, _, _, self._task = self._search._iterate(stp, f, g, b"START")

    def step(self, f: float, g: float) -> float | None:
        """Objective and directional derivative at the last step: the next step, or None (accept it)."""
        if self._task[:2] != b"FG":
            return None
        stp, _, _, self._task = self._search._iterate(self.stp, f, g, self._task)
        if self._task[:2] != b"FG":
            return None
        self.stp = float(stp)
        return self.stp


def _dcsrch_class() -> Any:
    """The ``DCSRCH`` class of scipy (a private module: refuse in one line if a scipy release moves it)."""
    try:
        from scipy.optimize._dcsrch import DCSRCH
    except ImportError as exc:  # pragma: no cover - depends on the installed scipy
        from ppgbench_pl.errors import ConfigError

        raise ConfigError("logistic_solver: batched needs scipy's Moré-Thuente search (scipy.optimize._dcsrch), "
                          f"which this scipy does not have ({exc}); use logistic_solver: sklearn") from None
    return DCSRCH


def _two_loop(g: torch.Tensor, proj: torch.Tensor, mem: torch.Tensor, gram: torch.Tensor, rho: torch.Tensor,
              gamma: torch.Tensor, head: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """H g for the L-BFGS inverse Hessian of each problem's ring memory, by inner products only.

    ``mem`` [A, 2m, q] holds the s pairs (slots 0..m-1) and y pairs (m..2m-1), ``gram`` [A, 2m, 2m] their
    inner products and ``proj`` [A, 2m] theirs with ``g`` (both kept up to date by the caller), ``head``
    each problem's next slot to write. The two-loop recursion (newest pair first, then oldest first) runs
    on [A, m] coefficients, so H g is one pass over the memory and the problems' rings need not be
    aligned; empty slots (rho 0) get zero coefficients.

    Returns:
        (H g, w) with H g = gamma g + w @ mem.

    """
    m = mem.shape[1] // 2
    order = torch.as_tensor((head[:, None] - 1 - np.arange(m)[None, :]) % m, device=g.device)  # newest first
    both = torch.cat([order, order + m], 1)  # [A, 2m]: s then y slots, by age
    proj = proj.gather(1, both)
    gm = gram.gather(1, both[:, :, None].expand(-1, -1, 2 * m)).gather(2, both[:, None, :].expand(-1, 2 * m, -1))
    sg, yg, sy, yy = proj[:, :m], proj[:, m:], gm[:, :m, m:], gm[:, m:, m:]  # sy[i, j] = s_i . y_j
    r_o = rho.gather(1, order)[:, :, None]
    eye = torch.eye(m, dtype=g.dtype, device=g.device)
    # first loop, newest first: alpha_j = rho_j (s_j . g - sum over newer i < j of alpha_i s_j . y_i)
    lower = eye + r_o * torch.tril(sy, -1)
    alpha = torch.linalg.solve_triangular(lower, r_o * sg[:, :, None], upper=False, unitriangular=True)
    yq = yg[:, :, None] - yy @ alpha  # y_j . q, q = g - sum alpha_i y_i
    # second loop, oldest first: coef_j = alpha_j - beta_j, beta_j = rho_j y_j . (gamma q + sum over
    # older i > j of coef_i s_i)
    upper = eye + r_o * torch.triu(sy.transpose(1, 2), 1)
    coef = torch.linalg.solve_triangular(upper, alpha - r_o * gamma[:, None, None] * yq, upper=True,
                                         unitriangular=True)
    alpha, coef = alpha[:, :, 0], coef[:, :, 0]
    weights = torch.zeros_like(proj).scatter(1, both, torch.cat([coef, -gamma[:, None] * alpha], 1))
    return gamma[:, None] * g + (weights[:, None, :] @ mem)[:, 0], weights


def lbfgs_like_sklearn(evaluate: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                       x0: torch.Tensor, tol: float = SKLEARN_TOL, max_iter: int = SKLEARN_MAX_ITER,
                       history: int = SKLEARN_HISTORY, maxls: int = SKLEARN_MAXLS,
                       ftol: float = SKLEARN_FTOL) -> tuple[torch.Tensor, np.ndarray]:
    """The L-BFGS-B of scipy without bounds (what scikit-learn's lbfgs runs), on many problems at once.

    Each problem follows its own L-BFGS-B path: the steepest-descent first step of length 1 / ||g||, then
    the quasi-Newton direction of the last ``history`` pairs (scaled by s'y / y'y of the newest), the
    Moré-Thuente line search (:class:`_MoreThuente`, at most ``maxls`` evaluations; on failure the memory
    is dropped, or the problem stops when it had none, as L-BFGS-B does), a pair skipped when its curvature
    s'y is not positive, and the stops ``max |g| <= tol``, ``(f_old - f) <= ftol * max(|f_old|, |f|, 1)``
    or ``max_iter`` iterations. Only the arithmetic is batched: every round evaluates the trial points of
    all unfinished problems together; finished problems leave the batch.

    Args:
        evaluate: ``(x [A, q], ids [A]) -> (f [A], g [A, q])`` for the problems ``ids``.
        x0: Starting points [Q, q].
        tol: Stop when the max-abs gradient is at most this (scikit-learn's ``tol``, scipy's ``gtol``).
        max_iter: Iteration cap (scikit-learn's ``max_iter``).
        history: Memory pairs (scipy's ``maxcor``).
        maxls: Evaluations per line search (scipy's ``maxls``).
        ftol: Relative decrease of the objective that stops (scipy's ``ftol``).

    Returns:
        (solutions [Q, q], iterations per problem [Q]).

    """
    n_all, q = x0.shape
    dev, eps = x0.device, float(np.finfo(np.float64).eps)
    out, iters = x0.clone(), np.zeros(n_all, dtype=np.int64)
    ids = torch.arange(n_all, device=dev)
    f, g = evaluate(x0, ids)
    keep = (g.abs().amax(1) > tol).cpu().numpy()
    x, f, g, ids = x0[keep], f[keep], g[keep], ids[keep]
    n = len(ids)
    mem = torch.zeros(n, 2 * history, q, dtype=x.dtype, device=dev)  # s pairs, then y pairs
    gram = torch.zeros(n, 2 * history, 2 * history, dtype=x.dtype, device=dev)
    rho = torch.zeros(n, history, dtype=x.dtype, device=dev)
    gamma = torch.ones(n, dtype=x.dtype, device=dev)
    d, gd0 = torch.zeros_like(x), torch.zeros(n, dtype=x.dtype, device=dev)
    # mem @ g, and of the current direction d = -(dir_gamma g + dir_w @ mem): its proj, w and gamma (they
    # give the new pair's inner products with the memory without another pass over it)
    proj, dir_proj, dir_w = (torch.zeros(n, 2 * history, dtype=x.dtype, device=dev) for _ in range(3))
    dir_gamma = torch.ones(n, dtype=x.dtype, device=dev)
    state = [mem, gram, rho, gamma, proj]
    head, n_col, n_iter = (np.zeros(n, dtype=np.int64) for _ in range(3))
    f_np, stp = f.cpu().numpy().copy(), np.zeros(n)
    need = np.ones(n, dtype=bool)  # rows that need a new direction
    searches: list[_MoreThuente | None] = [None] * n
    evals = np.zeros(n, dtype=np.int64)
    while n:
        finished = np.zeros(n, dtype=bool)
        while need.any():  # new directions (a non-descent direction drops the memory and tries again)
            # every row's direction (cheaper than gathering the memories of some), kept where needed
            rows = np.flatnonzero(need)
            hg, w = _two_loop(g, proj, mem, gram, rho, gamma, head)
            steepest = torch.as_tensor(n_col == 0, device=dev)
            d_new = -torch.where(steepest[:, None], g, hg)
            slope = (g * d_new).sum(1)
            w = torch.where(steepest[:, None], 0.0, w)
            step_gamma = torch.where(steepest, 1.0, gamma)
            if len(rows) == n:
                d, gd0, dir_proj, dir_w, dir_gamma = d_new, slope, proj, w, step_gamma
            else:
                needed = torch.as_tensor(need, device=dev)
                d = torch.where(needed[:, None], d_new, d)
                gd0 = torch.where(needed, slope, gd0)
                dir_proj = torch.where(needed[:, None], proj, dir_proj)
                dir_w = torch.where(needed[:, None], w, dir_w)
                dir_gamma = torch.where(needed, step_gamma, dir_gamma)
            info = torch.stack([slope, torch.linalg.vector_norm(d_new, dim=1)]).cpu().numpy()[:, rows]
            need[:] = False
            for i, row in enumerate(rows):
                if info[0, i] >= 0:  # line search impossible: as a failed one
                    if n_col[row] == 0:
                        finished[row] = True
                    else:
                        n_col[row], need[row] = 0, True
                        _drop_memory(int(row), *state)
                    continue
                first = n_iter[row] == 0 and n_col[row] == 0
                stp[row] = min(1.0 / info[1, i], _LS_STPMAX) if first else 1.0
                searches[row] = _MoreThuente(float(f_np[row]), float(info[0, i]), float(stp[row]))
                evals[row] = 0
        steps = torch.as_tensor(stp, dtype=x.dtype, device=dev)
        trial = x + steps[:, None] * d
        ft, gt = evaluate(trial, ids)  # (finished rows ride along once; they are dropped below)
        dphi = (gt * d).sum(1)
        info = torch.stack([ft, dphi]).cpu().numpy()
        accepted = np.zeros(n, dtype=bool)
        for row in np.flatnonzero(~finished):
            search = searches[row]
            assert search is not None
            evals[row] += 1
            nxt = search.step(float(info[0, row]), float(info[1, row]))
            if nxt is None:
                accepted[row] = True
            elif evals[row] >= maxls:  # failed: the point stays; drop the memory, or stop without one
                if n_col[row] == 0:
                    finished[row] = True
                else:
                    n_col[row], need[row] = 0, True
                    _drop_memory(int(row), *state)
            else:
                stp[row] = nxt
        if accepted.any():
            g_old = g
            if accepted.all():
                x, g, f = trial, gt, ft
            else:
                acc = torch.as_tensor(accepted, device=dev)
                x = torch.where(acc[:, None], trial, x)
                g = torch.where(acc[:, None], gt, g)
                f = torch.where(acc, ft, f)
            f_old = f_np.copy()
            f_np = np.where(accepted, info[0], f_np)
            n_iter += accepted
            yv = g - g_old
            proj_new = (mem @ g[:, :, None])[:, :, 0]  # (unchanged where g is)
            stats = torch.stack([g.abs().amax(1), (yv * yv).sum(1)]).cpu().numpy()
            small = (f_old - f_np) <= ftol * np.maximum(np.maximum(np.abs(f_old), np.abs(f_np)), 1.0)
            stop = accepted & ((stats[0] <= tol) | small | (n_iter >= max_iter))
            finished |= stop
            dr = (info[1] - gd0.cpu().numpy()) * stp
            update = accepted & ~stop & (dr > eps * (-gd0.cpu().numpy() * stp))
            if update.any():
                rows = np.flatnonzero(update)
                rt = torch.as_tensor(rows, device=dev)
                slots = torch.as_tensor(head[rows], device=dev)
                step_u, y_u, g_u, st = steps[rt, None] * d[rt], yv[rt], g[rt], steps[rt, None]
                # the new pairs' inner products with every slot: s = -stp (dir_gamma g_old + dir_w @ mem)
                # and y = g - g_old, with g_old @ mem = dir_proj; then their own
                s_dots = -st * (dir_gamma[rt, None] * dir_proj[rt] + (gram[rt] @ dir_w[rt, :, None])[:, :, 0])
                y_dots = proj_new[rt] - dir_proj[rt]
                sy = (step_u * y_u).sum(1)
                cols = torch.arange(len(rows), device=dev)
                s_dots[cols, slots], s_dots[cols, slots + history] = (step_u * step_u).sum(1), sy
                y_dots[cols, slots], y_dots[cols, slots + history] = sy, (y_u * y_u).sum(1)
                dots = torch.stack([s_dots, y_dots], 1)  # [u, 2, 2m]
                both = torch.stack([slots, slots + history], 1)  # [u, 2]
                gram[rt[:, None], both] = dots
                gram[rt[:, None], :, both] = dots
                mem[rt, slots], mem[rt, slots + history] = step_u, y_u
                proj_new[rt, slots] = (step_u * g_u).sum(1)
                proj_new[rt, slots + history] = (y_u * g_u).sum(1)
                rho[rt, slots] = torch.as_tensor(1.0 / dr[rows], dtype=x.dtype, device=dev)
                gamma[rt] = torch.as_tensor(dr[rows] / stats[1, rows], dtype=x.dtype, device=dev)
                head[rows] = (head[rows] + 1) % history
                n_col[rows] = np.minimum(n_col[rows] + 1, history)
            proj = proj_new
            state[4] = proj
            need |= accepted & ~stop
        if finished.any():  # write out and leave the batch
            done_rows = torch.as_tensor(np.flatnonzero(finished), device=dev)
            out[ids[done_rows]] = x[done_rows]
            iters[ids[done_rows].cpu().numpy()] = n_iter[finished]
            k = torch.as_tensor(np.flatnonzero(~finished), device=dev)
            x, f, g, d, gd0, ids = x[k], f[k], g[k], d[k], gd0[k], ids[k]
            mem, gram, rho, gamma, proj = mem[k], gram[k], rho[k], gamma[k], proj[k]
            dir_proj, dir_w, dir_gamma = dir_proj[k], dir_w[k], dir_gamma[k]
            state = [mem, gram, rho, gamma, proj]
            kn = ~finished
            head, n_col, n_iter, f_np, stp = head[kn], n_col[kn], n_iter[kn], f_np[kn], stp[kn]
            need, evals = need[kn], evals[kn]
            searches = [sr for sr, kk in zip(searches, kn, strict=True) if kk]
            n = len(ids)
    return out, iters


def _drop_memory(row: int, mem: torch.Tensor, gram: torch.Tensor, rho: torch.Tensor, gamma: torch.Tensor,
                 proj: torch.Tensor) -> None:
    """Forget one problem's memory (L-BFGS-B's restart after a failed line search)."""
    mem[row], gram[row], rho[row], gamma[row], proj[row] = 0.0, 0.0, 0.0, 1.0, 0.0
