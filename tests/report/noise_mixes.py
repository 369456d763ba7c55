"""Seeded simulator of a benchmark cell under several noise mixes, for calibrating every interval (issue 31).

Written for ppgbench (not the issue's simulator). One replicate draws N new subjects; 5 seeds re-deal the
same subjects into 5 subject-disjoint folds. Model M's loss (MAE) or logit of a correct window (balanced
accuracy) on subject i in fold k of seed s:

    base(i) +- w(i)/2 + eta_M(s, i) + e_M(s, k) + f_M(s) +- v_part(s, k)/2

* w: subject x model effect (``sw``), the paired difference of a subject;
* eta: per-subject, per-fit prediction noise (MAE); for balanced accuracy each subject has fixed windows
  (one uniform draw per window, shared by every fit and both models), so the logit noises move them;
* e: per-fold training noise (``se``) and f: per-seed fit noise (``sf``), independent per model;
* v_part: a training-set-dependent fold effect, the mean over the fold's *training* subjects of a
  per-subject contribution v(i) (``sv``): a fold's result depends on whom it trained on.

Each model gets half of every difference noise (variance), so the paired difference has the stated sd and
both models have the same marginal distribution (the null is exact, also for balanced accuracy). A true
difference ``delta`` is added to model A's MAE, or (balanced accuracy) a logit shift whose expected
balanced-accuracy gain is ``delta`` (:func:`bacc_shift`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

SEEDS, FOLDS = 5, 5
#: Noise mixes (sd of the paired difference, MAE units; balanced accuracy uses logits x LOGIT_SCALE).
MIXES: dict[str, dict[str, float]] = {
    "subject x model only": {"sw": 2.0, "sf": 0.0, "se": 0.0, "sv": 0.0},
    "with per-seed fit noise": {"sw": 2.0, "sf": 0.6, "se": 0.0, "sv": 0.0},
    "with per-fold training noise": {"sw": 2.0, "sf": 0.0, "se": 1.0, "sv": 0.0},
    "training-noise dominated": {"sw": 0.5, "sf": 0.5, "se": 2.0, "sv": 0.0},
    "no subject x model effect": {"sw": 0.0, "sf": 0.3, "se": 1.0, "sv": 0.0},
    "training-set-dependent fold effect": {"sw": 2.0, "sf": 0.0, "se": 0.5, "sv": 2.0},
}
ETA = 0.5
LOGIT_SCALE = 0.25
WINDOWS = 8  # windows per class per subject (balanced accuracy)


@dataclass
class Cell:
    """Replicates of one cell: fold values [R, S, K] of a and b, the layout and per-subject statistics."""

    a: np.ndarray
    b: np.ndarray
    member: np.ndarray  # [R, S, K, N] 1 where subject n is in the test fold
    stats_a: np.ndarray  # [R, S, N, k] per-subject sufficient statistics (report/two_level_rows.py layout)
    stats_b: np.ndarray
    kind: str

    @property
    def diff(self) -> np.ndarray:
        """[R, J] fold differences a - b, units in (seed, fold) order."""
        return (self.a - self.b).reshape(len(self.a), -1)

    def layout(self) -> tuple[np.ndarray, np.ndarray]:
        """F [J, J] and W [R, J, J] of :func:`ppgbench_pl.results.components.estimate`."""
        reps, seeds, folds, n = self.member.shape
        m = self.member.reshape(reps, seeds * folds, n)
        m = m / m.sum(axis=2, keepdims=True)
        seed_of = np.repeat(np.arange(seeds), folds)
        return (seed_of[:, None] == seed_of[None, :]).astype(float), m @ m.transpose(0, 2, 1)


def _deal(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
    """[R, S, K, N] test-fold membership: every seed deals the same N subjects into K disjoint folds."""
    sizes = [len(x) for x in np.array_split(np.arange(n), FOLDS)]
    fold_of_pos = np.repeat(np.arange(FOLDS), sizes)
    order = rng.permuted(np.broadcast_to(np.arange(n), (reps, SEEDS, n)), axis=2)
    fold_of = np.empty_like(order)
    np.put_along_axis(fold_of, order, np.broadcast_to(fold_of_pos, order.shape), axis=2)
    return (fold_of[:, :, None, :] == np.arange(FOLDS)[None, None, :, None]).astype(float)


def _terms(rng: np.random.Generator, member: np.ndarray, mix: dict[str, float], scale: float,
           ) -> tuple[np.ndarray, np.ndarray]:
    """Per-subject, per-seed noise of models a and b [R, S, N] (everything but the shared base)."""
    reps, seeds, folds, n = member.shape
    half = math.sqrt(0.5) * scale
    w = rng.normal(0, mix["sw"] * scale, (reps, 1, n))
    v = rng.normal(0, mix["sv"] * scale, (reps, n))
    sizes = member.sum(axis=3)  # [R, S, K]
    train_v = (v.sum(axis=1)[:, None, None] - np.einsum("rskn,rn->rsk", member, v)) / (n - sizes)
    out = []
    for sign in (1.0, -1.0):
        e = rng.normal(0, mix["se"] * half, (reps, seeds, folds)) + sign * train_v / 2
        f = rng.normal(0, mix["sf"] * half, (reps, seeds, 1))
        per_fold = np.einsum("rsk,rskn->rsn", e, member)
        eta = rng.normal(0, ETA * half, (reps, seeds, n)) if scale == 1.0 else 0.0
        out.append(sign * w / 2 + per_fold + f + eta)
    return out[0], out[1]


def simulate(rng: np.random.Generator, reps: int, mix: str, n: int, kind: str = "regression",
             delta: float = 0.0) -> Cell:
    """``reps`` replicates of a cell with ``n`` subjects under ``mix`` and true difference ``delta``."""
    member = _deal(rng, reps, n)
    sizes = member.sum(axis=3)
    if kind == "regression":
        base = rng.normal(10.0, 3.0, (reps, 1, n))
        ta, tb = _terms(rng, member, MIXES[mix], 1.0)
        la, lb = base + ta + delta, base + tb
        fold = [np.einsum("rskn,rsn->rsk", member, x) / sizes for x in (la, lb)]
        stats = [np.stack([x, np.ones_like(x)], axis=-1) for x in (la, lb)]
        return Cell(fold[0], fold[1], member, stats[0], stats[1], kind)
    base = rng.normal(1.0, 0.8, (reps, 1, n))
    ta, tb = _terms(rng, member, MIXES[mix], LOGIT_SCALE)
    shift = bacc_shift(mix, delta) if delta else 0.0
    folds, stats = [], []
    draw = rng.random((reps, 1, n, 2, WINDOWS))  # the windows are fixed: every fit scores the same ones
    for t, extra in ((ta, shift), (tb, 0.0)):
        correct = [(draw[..., i, :] < special.expit(base + t + extra + c)[..., None]).sum(-1)
                   for i, c in enumerate((0.3, -0.3))]
        per = np.stack([*correct, np.full_like(correct[0], WINDOWS), np.full_like(correct[1], WINDOWS)], -1)
        stats.append(per.astype(float))
        hits = np.einsum("rskn,rsnc->rskc", member, per[..., :2].astype(float))
        folds.append((hits / (sizes[..., None] * WINDOWS)).mean(axis=-1))
    return Cell(folds[0], folds[1], member, stats[0], stats[1], kind)


def bacc_shift(mix: str, delta: float, draws: int = 400_000) -> float:
    """The logit shift of model A whose expected balanced-accuracy gain over B is ``delta`` (bisection)."""
    rng = np.random.default_rng(12345)
    p = MIXES[mix]
    sd = LOGIT_SCALE * math.sqrt(p["sw"] ** 2 / 4 + (p["se"] ** 2 + p["sf"] ** 2 + p["sv"] ** 2 / 25) / 2)
    logit = rng.normal(1.0, 0.8, draws) + rng.normal(0, sd, draws)
    ref = np.mean([special.expit(logit + c).mean() for c in (0.3, -0.3)])
    lo, hi = -3.0, 3.0
    for _ in range(50):
        mid = (lo + hi) / 2
        gain = np.mean([special.expit(logit + mid + c).mean() for c in (0.3, -0.3)]) - ref
        lo, hi = (mid, hi) if gain < delta else (lo, mid)
    return (lo + hi) / 2
