"""The two-level interval of the paired verdicts (issue 31): ``var(mean d) = sw2 / N + var(seed means) / S``.

Subject x model effects recur in every seed, training noise averages over seeds; Satterthwaite df (docs/statistics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppgbench_pl.results.inference import ALPHA, POWER, t_ppf


def subject_scores(stats: np.ndarray, kind: str) -> np.ndarray:
    """Per-subject scores whose plain mean is the pooled metric (MAE or balanced accuracy) of the subjects."""
    stats = np.asarray(stats, dtype=float)
    if kind == "regression":
        return stats[:, 0] / stats[:, 1].mean()
    half = stats.shape[1] // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = stats[:, :half] / stats[:, half:].mean(axis=0)
    return np.nanmean(per_class, axis=1)


def subject_term(subject_diff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sw2 / N per row of ``subject_diff`` [R, S, N] and its df (NaN with one seed); sw2: mean cross-seed covariance.

    The df come from the spread of the subjects' products, not N - 1 (liberal when sw2 is near 0).
    """
    sub = np.asarray(subject_diff, dtype=float)
    if sub.ndim == 2:
        sub = sub[None]
    seeds, n = sub.shape[1], sub.shape[2]
    if seeds < 2 or n < 2:
        nan = np.full(len(sub), np.nan)
        return nan, nan
    centred = sub - sub.mean(axis=2, keepdims=True)
    upper = np.triu_indices(seeds, 1)
    per_subject = (centred[:, upper[0], :] * centred[:, upper[1], :]).mean(axis=1) * n / (n - 1)  # [R, N]
    term = np.maximum(per_subject.mean(axis=1), 0.0) / n
    spread = per_subject.var(axis=1, ddof=1) / n / n ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(spread > 0, 2 * term ** 2 / spread, n - 1)
    return term, np.clip(df, 1.0, n - 1)


def satterthwaite(subject: Any, seed: Any, df_subject: Any, seeds: int) -> np.ndarray:
    """Degrees of freedom of subject + seed, with ``df_subject`` and S - 1 of their own (at least 1)."""
    a, b = np.asarray(subject, dtype=float), np.asarray(seed, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (a + b) ** 2 / (a ** 2 / np.asarray(df_subject, dtype=float) + b ** 2 / max(seeds - 1, 1))
    return np.clip(np.nan_to_num(df, nan=max(seeds - 1, 1)), 1.0, None)


def seed_term(seed_means: Any) -> float:
    """The variance over seeds of the seed means of the differences, over S (NaN with one seed)."""
    m = np.asarray(seed_means, dtype=float)
    return float(m.var(ddof=1) / len(m)) if len(m) > 1 else math.nan


@dataclass(frozen=True)
class TwoLevelTest:
    """The two-level test of a mean paired difference (NaN where undefined)."""

    mean: float
    se: float
    df: float
    p: float
    ci_low: float
    ci_high: float
    var_subject: float
    var_seed: float

    def mdd(self, alpha: float = ALPHA, power: float = POWER) -> float:
        """``(t_{1-alpha/2, df} + t_{power, df}) * se``: the smallest difference detected with ``power``."""
        return two_level_mdd(self.var_subject, self.var_seed, self.df, alpha, power)


def two_level_mdd(var_subject: float, var_seed: float, df: float, alpha: float = ALPHA,
                  power: float = POWER) -> float:
    """The MDD of the two-level test from its two variance terms and df (NaN when unknown)."""
    se = math.sqrt(var_subject + var_seed) if math.isfinite(var_subject + var_seed) else math.nan
    if not (math.isfinite(se) and math.isfinite(df)):
        return math.nan
    return (t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * se


def two_level_test(mean: float, var_seed: float, subject_diff: Any, alpha: float = ALPHA) -> TwoLevelTest:
    """The two-level test of ``mean`` = 0 (module docstring); NaN with fewer than two seeds or subjects."""
    from scipy.special import stdtr

    sub = np.asarray(subject_diff, dtype=float)
    nan = math.nan
    if sub.ndim != 2 or sub.shape[0] < 2 or sub.shape[1] < 2 or not math.isfinite(var_seed):
        return TwoLevelTest(mean, nan, nan, nan, nan, nan, nan, nan)
    terms, dfs = subject_term(sub)
    subject, df_subject = float(terms[0]), float(dfs[0])
    df = float(satterthwaite(subject, var_seed, df_subject, sub.shape[0]))
    se = math.sqrt(subject + var_seed)
    if se == 0:
        return TwoLevelTest(mean, se, df, 1.0 if mean == 0 else 0.0, mean, mean, subject, var_seed)
    half = t_ppf(1 - alpha / 2, df) * se
    p = 2 * float(stdtr(df, -abs(mean / se)))
    return TwoLevelTest(mean, se, df, p, mean - half, mean + half, subject, var_seed)


def seeds_for(var_subject: float, var_seed: float, seeds: int, n: int, gain: float, level: float = ALPHA,
              power: float = POWER, max_seeds: int = 1000) -> int | None:
    """Seeds (re-dealing the same N subjects) whose two-level MDD at ``level`` reaches ``gain``; None if none."""
    if not (gain > 0 and math.isfinite(var_subject) and math.isfinite(var_seed)):
        return None
    for s in range(2, max_seeds + 1):
        seed = var_seed * seeds / s
        df = float(satterthwaite(var_subject, seed, max(n - 1, 1), s))
        if two_level_mdd(var_subject, seed, df, level, power) <= gain:
            return s
    return None


def subjects_for(var_subject: float, var_seed: float, seeds: int, n: int, gain: float, level: float = ALPHA,
                 power: float = POWER, max_subjects: int = 100_000) -> int | None:
    """Subjects (same seeds) whose two-level MDD at ``level`` reaches ``gain``; None if the seed term forbids it."""
    if not (gain > 0 and math.isfinite(var_subject) and math.isfinite(var_seed) and n > 0):
        return None
    df = float(satterthwaite(var_subject, var_seed, max(n - 1, 1), seeds))
    room = (gain / (t_ppf(1 - level / 2, df) + t_ppf(power, df))) ** 2 - var_seed
    if room <= 0:
        return None
    needed = max(math.ceil(var_subject * n / room), 2)
    return needed if needed <= max_subjects else None
