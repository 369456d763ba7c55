"""Signal operations shared by every dataset: resampling, windowing and the flat-line rule."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy.signal import resample_poly

from ppgbench_pl.errors import DataError
from ppgbench_pl.limits import MAX_RAW_RATE, MIN_RAW_RATE


def raw_rate(fs: float, what: str) -> float:
    """A sampling rate read from a raw file, refused (naming ``what``: file and field) outside 10 Hz-10 kHz."""
    try:
        value = float(fs)
    except (TypeError, ValueError):
        raise DataError(f"{what}: sampling rate {fs!r} is not a number") from None
    if not MIN_RAW_RATE <= value <= MAX_RAW_RATE:
        raise DataError(f"{what}: sampling rate {value:g} Hz is outside {MIN_RAW_RATE:g}-{MAX_RAW_RATE:g} Hz "
                        "(a damaged header, or a rate in another unit?)")
    return value


def integer_rate(fs: float, what: str) -> int:
    """Native rates must be integers for rational resampling (PROTOCOL.md 1.0)."""
    if not float(fs).is_integer() or fs <= 0:
        raise DataError(f"{what}: sampling rate {fs} is not a positive integer")
    return int(raw_rate(fs, what))


def resample(signal: np.ndarray, native_fs: float, target_fs: float, what: str = "signal") -> np.ndarray:
    """Polyphase resampling (SciPy ``resample_poly``, default Kaiser FIR) to float32; equal rates: a copy."""
    native = integer_rate(native_fs, what)
    ratio = Fraction(int(target_fs) if float(target_fs).is_integer() else target_fs).limit_denominator(10_000)
    ratio = ratio / native
    x = np.asarray(signal, dtype=np.float64)
    if ratio == 1:
        return x.astype(np.float32)
    return resample_poly(x, ratio.numerator, ratio.denominator, axis=-1).astype(np.float32)


def window_starts(n_samples: int, window: int, stride: int) -> np.ndarray:
    """Start indices of full windows from sample 0; any tail shorter than a window is dropped."""
    if window <= 0 or stride <= 0:
        raise ValueError("window and stride must be positive")
    if n_samples < window:
        return np.zeros(0, dtype=np.int64)
    return np.arange(0, n_samples - window + 1, stride, dtype=np.int64)


def resample_gaps(
    signal: np.ndarray, native_fs: float, target_fs: float, what: str = "signal"
) -> tuple[np.ndarray, np.ndarray]:
    """Resample with NaN/inf samples bridged for the filter only; output near one is NaN again (and in the mask)."""
    x = np.asarray(signal, dtype=np.float64)
    bad = ~np.isfinite(x)
    if not bad.any():
        out = resample(x, native_fs, target_fs, what)
        return out, np.zeros(len(out), dtype=bool)
    if bad.all():
        out = resample(np.zeros_like(x), native_fs, target_fs, what)
        return np.full(len(out), np.nan, dtype=np.float32), np.ones(len(out), dtype=bool)
    positions = np.arange(len(x))
    filled = x.copy()
    filled[bad] = np.interp(positions[bad], positions[~bad], x[~bad])
    out = resample(filled, native_fs, target_fs, what)
    at = np.arange(len(out)) * (float(native_fs) / float(target_fs))  # output times in native samples
    below = np.clip(np.floor(at).astype(np.int64), 0, len(x) - 1)
    above = np.clip(np.ceil(at).astype(np.int64), 0, len(x) - 1)
    out_bad = bad[below] | bad[above]
    out[out_bad] = np.nan
    return out, out_bad


def finite_windows(windows: np.ndarray) -> np.ndarray:
    """True for windows whose every sample is finite."""
    return np.isfinite(windows).all(axis=1)


def flatline_mask(windows: np.ndarray, fraction: float = 0.05) -> np.ndarray:
    """True for windows to keep: finite, with std >= ``fraction`` x the median std of the finite windows.

    The published median over every window made one NaN reject a subject; on finite input both agree.
    """
    finite = finite_windows(windows)
    if not finite.any():
        return finite
    stds = np.zeros(len(windows), dtype=np.float64)
    stds[finite] = windows[finite].std(axis=1)
    return finite & (stds >= fraction * np.median(stds[finite]))


def rejection_counts(windows: np.ndarray, keep_flat: np.ndarray, **other: np.ndarray) -> dict[str, int]:
    """Windows dropped per reason: ``non_finite``, ``flat`` (from ``keep_flat``), then each mask in ``other``."""
    finite = finite_windows(windows)
    counts = {"non_finite": int((~finite).sum()), "flat": int((finite & ~keep_flat).sum())}
    dropped = ~finite | ~keep_flat
    for reason, mask in other.items():
        mask = np.asarray(mask, dtype=bool)
        counts[reason] = int((mask & ~dropped).sum())
        dropped |= mask
    return {reason: n for reason, n in counts.items() if n}
