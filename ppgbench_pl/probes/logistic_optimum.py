"""The ``optimum`` method of the batched logistic probe: preconditioned, mixed-precision batched L-BFGS.

Every part of one C in one L-BFGS to a gradient of 1e-8, warm-started along the C path by the caller
(:class:`ppgbench_pl.probes.logistic.LogisticPath`), in variables where the Hessian is close to the identity.
"""

from __future__ import annotations

import torch

from ppgbench_pl.probes.logistic_objective import _Problem


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
