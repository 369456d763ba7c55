"""Simulated seed x fold scores with known truth, for calibrating the verdicts (issue 19; fast, vectorised).

Subject model (what a CV benchmark is): N subjects, each with a difficulty b_i (shared by both models)
and a paired loss difference e_i ~ N(delta, sd_e) (model A minus model B). Every seed partitions the
same N subjects into K folds; a fold value of model M is the mean loss of its test subjects plus
training noise ~ N(0, sd_t) (independent per model, seed and fold). Equicorrelated model (the
assumption of Nadeau and Bengio): the J = S K differences are N(delta, s) with correlation
rho = r / (1 + r), r = n_test / n_train, which makes the corrected variance exact.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ppgbench_pl.results.inference import mdd


def subject_runs(rng: np.random.Generator, runs: int, delta: float, n: int = 30, seeds: int = 5, folds: int = 5,
                 sd_b: float = 3.0, sd_e: float = 2.0, sd_t: float = 0.5) -> dict[str, np.ndarray]:
    """Fold values [runs, seeds, folds] of models a and b, and per-subject losses for the bootstrap."""
    base = rng.normal(10.0, sd_b, (runs, 1, n))
    e = rng.normal(delta, sd_e, (runs, 1, n))
    order = rng.permuted(np.broadcast_to(np.arange(n), (runs, seeds, n)), axis=2)
    test = order.reshape(runs, seeds, folds, n // folds)
    take = np.take_along_axis
    b_loss = take(np.broadcast_to(base, (runs, seeds, n)), order, 2).reshape(test.shape)
    e_loss = take(np.broadcast_to(e, (runs, seeds, n)), order, 2).reshape(test.shape)
    noise_a = rng.normal(0, sd_t, (runs, seeds, folds))
    noise_b = rng.normal(0, sd_t, (runs, seeds, folds))
    fold_b = b_loss.mean(axis=3) + noise_b
    fold_a = (b_loss + e_loss).mean(axis=3) + noise_a
    # per-subject out-of-fold losses per seed (subjects in index order), for the cluster bootstrap
    inverse = np.argsort(order, axis=2)
    sub_a = take((b_loss + e_loss + noise_a[..., None]).reshape(runs, seeds, n), inverse, 2)
    sub_b = take((b_loss + noise_b[..., None]).reshape(runs, seeds, n), inverse, 2)
    return {"a": fold_a, "b": fold_b, "sub_a": sub_a, "sub_b": sub_b}


def equicorrelated_diffs(rng: np.random.Generator, runs: int, delta: float, sd: float = 1.0, units: int = 25,
                         ratio: float = 0.25) -> np.ndarray:
    """[runs, units] differences with the correlation Nadeau and Bengio assume."""
    rho = ratio / (1 + ratio)
    shared = rng.normal(0, sd * math.sqrt(rho), (runs, 1))
    return delta + shared + rng.normal(0, sd * math.sqrt(1 - rho), (runs, units))


def corrected_t_rejects(diff: np.ndarray, ratio: float = 0.25, alpha: float = 0.05) -> np.ndarray:
    """Vectorised corrected t over the last axis (the same formula as results/inference.corrected_t)."""
    n = diff.shape[-1]
    se = np.sqrt(1 / n + ratio) * diff.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # sd 0 (identical seed means): t infinite, p 0
        t = diff.mean(axis=-1) / se
    return 2 * stats.t.sf(np.abs(t), n - 1) < alpha


def published_rejects(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The published rule on [runs, seeds, folds]: seed-mean CIs that do not overlap."""
    ma, mb = a.mean(axis=2), b.mean(axis=2)
    s = ma.shape[1]
    q = stats.t.ppf(0.975, s - 1) / math.sqrt(s)
    ca, cb = q * ma.std(axis=1, ddof=1), q * mb.std(axis=1, ddof=1)
    return np.abs(ma.mean(axis=1) - mb.mean(axis=1)) > ca + cb


def seed_t_rejects(a: np.ndarray, b: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """The ``paired`` rule: a plain paired t over the seed means."""
    d = (a - b).mean(axis=2)
    return corrected_t_rejects(d, ratio=0.0, alpha=alpha)


def expected_mdd(n: int = 30, folds: int = 5, seeds: int = 5, sd_e: float = 2.0, sd_t: float = 0.5) -> float:
    """The MDD the design has in expectation: fold-difference sd from the model's parameters."""
    sd = math.sqrt(sd_e ** 2 / (n // folds) + 2 * sd_t ** 2)
    return mdd(sd, seeds * folds, (n // folds) / (n - n // folds))
