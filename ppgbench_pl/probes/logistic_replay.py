"""scikit-learn's lbfgs (scipy's L-BFGS-B without bounds) replayed on many problems at once, in torch.

The ``sklearn`` method of the batched logistic probe (:class:`ppgbench_pl.probes.logistic.LogisticPath`): the
same iterations and steps as scikit-learn's ``LogisticRegression`` at its defaults, the arithmetic batched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

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
