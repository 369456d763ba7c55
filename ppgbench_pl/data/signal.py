"""Signal operations shared by every dataset: resampling, windowing and the flat-line rule."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy.signal import resample_poly

from ppgbench_pl.errors import DataError


def integer_rate(fs: float, what: str) -> int:
    """Native rates must be integers for rational resampling (PROTOCOL.md 1.0)."""
    if not float(fs).is_integer() or fs <= 0:
        raise DataError(f"{what}: sampling rate {fs} is not a positive integer")
    return int(fs)


def resample(signal: np.ndarray, native_fs: float, target_fs: float, what: str = "signal") -> np.ndarray:
    """Polyphase resampling (SciPy ``resample_poly``, default Kaiser FIR) to float32.

    Up/down factors are target/gcd and native/gcd; nothing happens when the rates are equal.
    """
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


def make_windows(signal: np.ndarray, window: int, stride: int) -> np.ndarray:
    """``[n_windows, window]`` view-copy of a 1-D signal."""
    starts = window_starts(len(signal), window, stride)
    if len(starts) == 0:
        return np.zeros((0, window), dtype=signal.dtype)
    return np.stack([signal[s : s + window] for s in starts])


def flatline_mask(windows: np.ndarray, fraction: float = 0.05) -> np.ndarray:
    """True for windows to keep: std >= ``fraction`` x the median per-window std of the subject."""
    if len(windows) == 0:
        return np.zeros(0, dtype=bool)
    stds = windows.std(axis=1)
    return stds >= fraction * np.median(stds)
