"""The simulation suite behind the trust table and docs/statistics.md (issue 31).

Each scenario (noise mix x metric x subjects) simulates null cells and cells whose true difference is the
mean MDD the report prints on the null cells, and measures the rejection rate of every interval ppgbench
offers and of the published CI-overlap rule. ``tools/statistics_tables.py`` runs the full suite and writes
``ppgbench_pl/report/trust_suite.json``; the tests run a small, deterministic part of it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ppgbench_pl.report.effects import spread_ratio
from ppgbench_pl.report.two_level_rows import cluster_bootstrap
from ppgbench_pl.results.inference import benjamini_hochberg, mdd
from ppgbench_pl.results.two_level import satterthwaite, subject_term
from tests.report.noise_mixes import Cell, simulate
from tests.report.simulate import corrected_t_rejects, published_rejects, seed_t_rejects

ALPHA = 0.05


def _ratio(cell: Cell) -> float:
    sizes = cell.member.sum(axis=3)
    n = cell.member.shape[3]
    return float(np.mean(sizes / (n - sizes)))


def printed_mdd(cell: Cell) -> float:
    """The mean MDD the report prints for these cells (corrected t, uncorrected level)."""
    d, ratio = cell.diff, _ratio(cell)
    return float(np.mean([mdd(s, d.shape[1], ratio) for s in d.std(axis=1, ddof=1)]))


def two_level_rejects(cell: Cell, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Rejections and printed MDDs of the two-level test (results/two_level.py, vectorised) on the cells."""
    p, mdds = _two_level_p(cell, alpha)
    return p < alpha, mdds


def subject_scores_batch(stats_: np.ndarray, kind: str) -> np.ndarray:
    """:func:`~ppgbench_pl.results.two_level.subject_scores` over [R, S, N, k] statistics (vectorised)."""
    if kind == "regression":
        return stats_[..., 0] / stats_[..., 1].mean(axis=-1, keepdims=True)
    half = stats_.shape[-1] // 2
    return np.nanmean(stats_[..., :half] / stats_[..., half:].mean(axis=-2, keepdims=True), axis=-1)


def _boot_rejects(cell: Cell, reps: int, draws: int) -> np.ndarray:
    n = cell.member.shape[3]
    names = np.array([f"s{i:03d}" for i in range(n)])
    out = []
    for r in range(min(reps, len(cell.a))):
        a = {s: (names, cell.stats_a[r, s]) for s in range(cell.a.shape[1])}
        b = {s: (names, cell.stats_b[r, s]) for s in range(cell.a.shape[1])}
        out.append(cluster_bootstrap(a, b, cell.kind, draws, r)["p"] < ALPHA)
    return np.array(out)


def scenario(seed: int, mix: str, kind: str, n: int, reps: int, boot_reps: int = 0,
             boot_draws: int = 300) -> dict[str, Any]:
    """Rejection rates under the null and at the printed MDD of every interval, for one scenario."""
    rng = np.random.default_rng(seed)
    null = simulate(rng, reps, mix, n, kind)
    at = printed_mdd(null)
    eff = simulate(rng, reps, mix, n, kind, delta=at)
    at_tl = float(two_level_rejects(null)[1].mean())
    eff_tl = simulate(rng, reps, mix, n, kind, delta=at_tl)
    ratio = _ratio(null)
    out: dict[str, Any] = {"mix": mix, "kind": kind, "n": n, "reps": reps, "mdd": at, "mdd_two_level": at_tl,
                           "spread_ratio": float(np.median([spread_ratio(row, np.repeat(np.arange(5), 5)) for row in null.diff]))}
    for name, rule in (("two_level", lambda c: two_level_rejects(c)[0]),
                       ("corrected_t", lambda c: corrected_t_rejects(c.diff, ratio)),
                       ("seed_interval", lambda c: seed_t_rejects(c.a, c.b)),
                       ("published_rule", lambda c: published_rejects(c.a, c.b))):
        out[name] = {"fpr": float(rule(null).mean()), "power": float(rule(eff_tl if name == "two_level" else eff).mean())}
    if boot_reps:
        out["bootstrap"] = {"fpr": float(_boot_rejects(null, boot_reps, boot_draws).mean()),
                            "power": float(_boot_rejects(eff, boot_reps, boot_draws).mean()), "reps": boot_reps}
    return out


def _two_level_p(cell: Cell, level: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """p-values and MDDs at ``level`` of the two-level test on the cells (vectorised)."""
    from scipy import stats

    sub = subject_scores_batch(cell.stats_a, cell.kind) - subject_scores_batch(cell.stats_b, cell.kind)
    seeds = sub.shape[1]
    subject, df_subject = subject_term(sub)
    seed = (cell.a - cell.b).mean(axis=2).var(axis=1, ddof=1) / seeds
    df = satterthwaite(subject, seed, df_subject, seeds)
    se = np.sqrt(subject + seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2 * stats.t.sf(np.abs(cell.diff.mean(axis=1) / se), df)
    return p, (stats.t.ppf(1 - level / 2, df) + stats.t.ppf(0.8, df)) * se


def study(seed: int, mix: str, kind: str, n: int, studies: int, cells: int = 68, effects: int = 10
          ) -> dict[str, Any]:
    """A benchmark of ``cells`` cells, ``effects`` of them with a true gain, Benjamini-Hochberg over the cells.

    The two-level test (the default). Returns the power per effect cell at the uncorrected MDD and at the
    MDD after the correction (the ``mdd_adj`` ppgbench prints: alpha / cells), and the family-wise error
    under the complete null.
    """
    rng = np.random.default_rng(seed)
    probe = simulate(rng, 400, mix, n, kind)
    at = float(_two_level_p(probe)[1].mean())
    at_adj = float(_two_level_p(probe, ALPHA / cells)[1].mean())
    out: dict[str, Any] = {"mix": mix, "kind": kind, "n": n, "cells": cells, "effects": effects,
                           "studies": studies, "mdd": at, "mdd_adj": at_adj}
    for label, delta in (("null", 0.0), ("at_mdd", at), ("at_mdd_adj", at_adj)):
        null = simulate(rng, studies * (cells - effects), mix, n, kind)
        eff = simulate(rng, studies * effects, mix, n, kind, delta=delta)
        p = np.concatenate([_two_level_p(eff)[0].reshape(studies, effects),
                            _two_level_p(null)[0].reshape(studies, cells - effects)], 1)
        gain = np.concatenate([eff.diff.mean(axis=1).reshape(studies, effects),
                               null.diff.mean(axis=1).reshape(studies, cells - effects)], 1)
        q = np.stack([benjamini_hochberg(row) for row in p])
        reject = (q < ALPHA) & ((gain > 0) if delta else True)
        if delta:
            out[f"power_{label}"] = float(reject[:, :effects].mean())
        else:
            out["fwer_null"] = float(reject.any(axis=1).mean())
    return out


def binomial_band(rate: float, reps: int, low: float = 0.02, high: float = 0.07, z: float = 3.3) -> bool:
    """Whether an observed rate over ``reps`` replicates is consistent with a true rate in [low, high].

    z = 3.3 (two-sided 0.001 per check) keeps a suite of about 50 checks from failing by chance.
    """
    def bound(p: float) -> float:
        return z * math.sqrt(p * (1 - p) / reps)

    return low - bound(low) <= rate <= high + bound(high)
