"""The batched objectives of the logistic probe: scikit-learn's mean log-loss + ||W||^2 / (2 C n) per part.

:class:`_Problem` takes every part over all rows with weights (the ``optimum`` solver's objective, with its
float32 products of the changes since a reference point; the replay's fallback when the folds do not
partition the rows); :class:`_ChunkedRows` takes each part's rows as whole validation chunks (the replay's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ppgbench_pl.probes.linear import Parts


def _unstandardised(w: torch.Tensor, b: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor,
                    neg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights [A, d, K] and intercepts [A, K] on the (centred) raw rows, absent classes' logits pushed down."""
    w_eff = w / scale[:, :, None]
    return w_eff, b - torch.einsum("pd,pdk->pk", mean, w_eff) + neg


def _standardised_grad(g_eff: torch.Tensor, gb: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                       scale: torch.Tensor, penalty: torch.Tensor, free_f: torch.Tensor) -> torch.Tensor:
    """The gradient [A, d+1, K] in the standardised parameters from the raw-row one (g_eff [A, d, K], gb [A, K]).

    Adds the ridge term and zeroes the fixed columns.
    """
    gw = (g_eff - mean[:, :, None] * gb[:, None, :]) / scale[:, :, None]
    gw = gw + 2.0 * penalty[:, None, None] * w
    return torch.cat([gw, gb[:, None, :]], dim=1) * free_f


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
        w_eff, b_eff = _unstandardised(w, b, mean, scale, neg)  # [A, d, K], [A, K]
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
        grad = _standardised_grad(g_eff, r.sum(2), w, mean, scale, penalty, free_f)
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
        w_eff, b_eff = _unstandardised(w, b, mean, scale, neg)
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
        grad = _standardised_grad(g_full[:, :, :-1].transpose(1, 2), g_full[:, :, -1], w, mean, scale, penalty,
                                  free_f)
        return loss, grad
