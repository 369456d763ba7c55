"""Paired inference over the seed x fold values of a cell: corrected t, MDD, planners, multiplicity.

Seeds re-partition the same subjects, so a plain paired t is too liberal; the Nadeau-Bengio (2003) corrected
resampled t uses ``var(mean d) = (1/J + n_test/n_train) s^2`` with df J - 1 (docs/statistics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

ALPHA, POWER = 0.05, 0.8
#: Test-to-train ratio of the protocol's 5-fold outer CV, used when the records do not say.
DEFAULT_RATIO = 0.25


def t_ppf(q: float, dof: float) -> float:
    """Student-t quantile (scipy.special, imported only when a test is computed)."""
    from scipy.special import stdtrit

    return float(stdtrit(dof, q))


@dataclass(frozen=True)
class PairedTest:
    """The corrected resampled t over J paired differences a - b (NaN where undefined); ``p`` two-sided, df J - 1."""

    n: int
    mean: float
    sd: float
    se: float
    t: float
    p: float
    ci_low: float
    ci_high: float
    ratio: float
    d_z: float


def corrected_t(diff: Any, ratio: float = DEFAULT_RATIO, alpha: float = ALPHA) -> PairedTest:
    """Nadeau-Bengio corrected resampled t-test of the mean of ``diff`` against 0 (``ratio`` 0: plain t)."""
    from scipy.special import stdtr

    d = np.asarray(diff, dtype=float)
    n, nan = len(d), math.nan
    mean = float(d.mean()) if n else nan
    if n < 2:
        return PairedTest(n, mean, nan, nan, nan, nan, nan, nan, ratio, nan)
    sd = float(d.std(ddof=1))
    se = math.sqrt(1.0 / n + ratio) * sd
    half = t_ppf(1 - alpha / 2, n - 1) * se
    if se == 0:
        t, p = (0.0, 1.0) if mean == 0 else (math.copysign(math.inf, mean), 0.0)
        return PairedTest(n, mean, sd, se, t, p, mean, mean, ratio, nan if mean == 0 else t)
    t = mean / se
    p = 2 * float(stdtr(n - 1, -abs(t)))
    return PairedTest(n, mean, sd, se, t, p, mean - half, mean + half, ratio, mean / sd)


def mdd(sd: float, n: int, ratio: float = DEFAULT_RATIO, alpha: float = ALPHA, power: float = POWER) -> float:
    """``(t_{1-alpha/2, J-1} + t_{power, J-1}) * sd * sqrt(1/J + ratio)``: the smallest difference detected."""
    if n < 2 or not math.isfinite(sd):
        return math.nan
    return (t_ppf(1 - alpha / 2, n - 1) + t_ppf(power, n - 1)) * sd * math.sqrt(1.0 / n + ratio)


def adjusted_mdd_at(value: float, n: int, level: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """An MDD at level ``alpha`` rescaled to the stricter per-test ``level`` (:func:`family_level`; same df)."""
    if n < 2 or not math.isfinite(value):
        return math.nan
    base = t_ppf(1 - alpha / 2, n - 1) + t_ppf(power, n - 1)
    return value * (t_ppf(1 - level / 2, n - 1) + t_ppf(power, n - 1)) / base


def family_level(alpha: float, tests: int) -> float:
    """The level alpha / m of Holm's first step and of Benjamini-Hochberg with one rejection (issue 31)."""
    return alpha / max(int(tests), 1)


def with_adjusted_mdd(frame: Any, alpha: float = ALPHA) -> Any:
    """summary.csv with ``mdd_adj``: each row's MDD at :func:`family_level` over its regime's rows with an MDD."""
    tests = np.isfinite(frame["mdd"].astype(float)).groupby(frame["regime"]).transform("sum")
    frame["mdd_adj"] = [adjusted_mdd_at(float(m), int(j), family_level(alpha, t), alpha)
                        for m, j, t in zip(frame["mdd"], frame["n_folds"], tests, strict=True)]
    return frame


def mdd_floor(sd: float, ratio: float = DEFAULT_RATIO, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDD with infinitely many seeds, ``(z_{1-alpha/2} + z_power) * sd * sqrt(ratio)``: only subjects lower it."""
    from scipy.special import ndtri

    return float((ndtri(1 - alpha / 2) + ndtri(power)) * sd * math.sqrt(ratio))


def seeds_needed(sd: float, delta: float, folds: int = 5, ratio: float = DEFAULT_RATIO,
                 alpha: float = ALPHA, power: float = POWER, max_seeds: int = 1000) -> int | None:
    """How many seeds (each with ``folds`` folds) make the MDD at most ``delta``; None at or below the floor."""
    if not (delta > 0 and math.isfinite(sd)) or delta <= mdd_floor(sd, ratio, alpha, power):
        return None
    return next((s for s in range(1, max_seeds + 1) if mdd(sd, s * folds, ratio, alpha, power) <= delta), None)


def subjects_needed(sd: float, delta: float, n_subjects: int, seeds: int = 5, folds: int = 5,
                    ratio: float = DEFAULT_RATIO, alpha: float = ALPHA, power: float = POWER,
                    max_subjects: int = 100_000) -> int | None:
    """Subjects (same seeds and folds) making the MDD at most ``delta`` if sd shrinks as sqrt(N); None: none."""
    if not (delta > 0 and math.isfinite(sd) and n_subjects > 0):
        return None
    now = mdd(sd, seeds * folds, ratio, alpha, power)
    if not math.isfinite(now):
        return None
    needed = math.ceil(n_subjects * (now / delta) ** 2)
    return max(needed, 1) if needed <= max_subjects else None


def holm(pvalues: Any) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error); NaN entries stay NaN and do not count."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    out[order] = np.minimum(np.maximum.accumulate((len(order) - np.arange(len(order))) * p[order]), 1.0)
    return out


def benjamini_hochberg(pvalues: Any) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate; scipy's), NaN entries kept out and NaN."""
    from scipy import stats

    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = stats.false_discovery_control(p[ok], method="bh")
    return out


def split_ratio(n_train: Any, n_test: Any, n_folds: int) -> float:
    """Mean test-to-train subject ratio of the units; ``1/(K-1)`` for K folds when the records lack counts."""
    tr, te = np.asarray(n_train, dtype=float), np.asarray(n_test, dtype=float)
    ok = np.isfinite(tr) & np.isfinite(te) & (tr > 0)
    if ok.any():
        return float(np.mean(te[ok] / tr[ok]))
    return 1.0 / (n_folds - 1) if n_folds >= 2 else DEFAULT_RATIO


def entries_mdd(entries: Any, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDD against the constant baseline of one model's fold entries (summary.csv ``mdd``)."""
    kept = [e for e in entries if e.value is not None and e.baseline is not None]
    if len(kept) < 2:
        return math.nan
    diff = np.array([e.value - e.baseline for e in kept])
    ratio = split_ratio([e.n_train if e.n_train else math.nan for e in kept],
                        [e.n_test if e.n_test else math.nan for e in kept], len({e.fold for e in kept}))
    return mdd(float(diff.std(ddof=1)), len(kept), ratio, alpha, power)


def one_sided_p(p_two_sided: Any, gain: Any) -> np.ndarray:
    """One-sided p of "a better than b" from a symmetric two-sided p and the sign of the gain (0.5 at 0)."""
    p, g = np.asarray(p_two_sided, dtype=float), np.asarray(gain, dtype=float)
    return np.where(g > 0, p / 2, np.where(g < 0, 1 - p / 2, 0.5))


def stouffer(p_one_sided: Any, weights: Any = None) -> tuple[float, float]:
    """Weighted Stouffer combination of one-sided p-values, NaN left out (MOABB's ``combine_pvalues``): (Z, its p)."""
    from scipy.special import ndtr

    p = np.asarray(p_one_sided, dtype=float)
    w = np.ones_like(p) if weights is None else np.asarray(weights, dtype=float)
    ok = np.isfinite(p) & np.isfinite(w)
    if not ok.any():
        return math.nan, math.nan
    z = z_score(p[ok])
    total = float(np.sum(w[ok] * z) / math.sqrt(float(np.sum(w[ok] ** 2))))
    return total, float(ndtr(-total))


def z_score(p_one_sided: Any) -> np.ndarray:
    """The normal score Phi^-1(1 - p), from the smaller tail (p and 1 - p give z and -z), tails clipped at 1e-16."""
    from scipy.special import ndtri

    p = np.asarray(p_one_sided, dtype=float)
    tail = np.clip(np.minimum(p, 1 - p), 1e-16, 0.5)
    return np.where(p < 0.5, -ndtri(tail), ndtri(tail))
