"""The encoders' native preprocessing along the last axis: float64 SciPy on the CPU in, float32 tensor out."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from numpy.typing import NDArray
from scipy import signal
from torch import Tensor

ArrayLike = NDArray[np.floating] | Tensor

#: Chebyshev type II band-pass used by PaPaGei (after pyPPG) and PulsePPG.
CHEBY_ORDER = 4
CHEBY_STOP_DB = 20.0
CHEBY_BAND_HZ = (0.5, 12.0)
#: Moving-average smoother of PaPaGei: 50 ms, only at rates of at least 75 Hz.
SMOOTH_SECONDS = 0.05
SMOOTH_MIN_FS = 75.0
#: Added to standard deviations so flat windows do not divide by zero.
STD_EPS = 1e-6
#: Ringing estimate as MNE's IIR filter makes it: the impulse response decays below this share of its peak.
RINGING_THRESHOLD = 1e-3
#: Longest impulse response followed (MNE gives up at the same length).
RINGING_MAX_SAMPLES = 100_000


def _as_numpy(x: ArrayLike | float) -> tuple[NDArray[np.float64], torch.device]:
    """Float64 array for SciPy plus the device to return to."""
    if isinstance(x, Tensor):
        return x.detach().to("cpu", torch.float64).numpy(), x.device
    return np.asarray(x, dtype=np.float64), torch.device("cpu")


def _as_tensor(x: NDArray[np.float64], device: torch.device) -> Tensor:
    """Float32 tensor on ``device`` (contiguous copy; SciPy output may be a strided view)."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)


def _padlen(length: int, default: int) -> int:
    """SciPy's default pad length, cut to ``length - 1`` for windows too short for it (PPG-BP: 105-263 samples)."""
    return max(0, min(default, length - 1))


def _check_band(band: tuple[float, float], fs: float) -> None:
    """Reject a band that does not fit below the Nyquist frequency (SciPy's message is cryptic)."""
    low, high = band
    if not 0.0 < low < high < fs / 2.0:
        raise ValueError(f"band-pass {low}-{high} Hz needs 0 < low < high < fs/2 = {fs / 2.0} Hz")


def sos_filtfilt(x: ArrayLike, sos: NDArray[np.float64], padlen: int | None = None) -> Tensor:
    """Zero-phase SOS filtering; ``padlen`` (default SciPy's ``3 * ntaps``) is cut to ``T - 1``."""
    arr, device = _as_numpy(x)
    if padlen is None:
        n_sections = sos.shape[0]
        ntaps = 2 * n_sections + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum()))
        padlen = 3 * ntaps
    out = signal.sosfiltfilt(sos, arr, axis=-1, padlen=_padlen(arr.shape[-1], padlen))
    return _as_tensor(out, device)


@lru_cache(maxsize=32)
def butter_ringing_samples(fs: float, band: tuple[float, float], order: int) -> int:
    """A Butterworth band-pass's last impulse-response sample above 0.1 % of its peak: MNE's zero-phase pad length."""
    impulse = np.zeros(RINGING_MAX_SAMPLES)
    impulse[0] = 1.0
    response = np.abs(signal.sosfilt(signal.butter(order, band, btype="bandpass", output="sos", fs=fs), impulse))
    last = int(np.flatnonzero(response > RINGING_THRESHOLD * response.max())[-1])
    if last >= RINGING_MAX_SAMPLES - 1:
        raise ValueError(f"filter rings longer than {RINGING_MAX_SAMPLES} samples; no pad length estimated")
    return last


def ba_filtfilt(x: ArrayLike, b: NDArray[np.float64], a: NDArray[np.float64]) -> Tensor:
    """Zero-phase transfer-function filtering along time with the short-window pad rule."""
    arr, device = _as_numpy(x)
    default = 3 * max(len(a), len(b))
    out = signal.filtfilt(b, a, arr, axis=-1, padlen=_padlen(arr.shape[-1], default))
    return _as_tensor(out, device)


def cheby2_bandpass_sos(x: ArrayLike, fs: float) -> Tensor:
    """Chebyshev II band-pass (order 4, 20 dB, 0.5-12 Hz), forward-backward in SOS form (PaPaGei)."""
    _check_band(CHEBY_BAND_HZ, fs)
    return sos_filtfilt(x, signal.cheby2(CHEBY_ORDER, CHEBY_STOP_DB, CHEBY_BAND_HZ, "bandpass", output="sos", fs=fs))


def cheby2_bandpass_ba(x: ArrayLike, fs: float) -> Tensor:
    """The same Chebyshev II band-pass in (b, a) form, as PulsePPG's preprocessing applies it."""
    _check_band(CHEBY_BAND_HZ, fs)
    b, a = signal.cheby2(CHEBY_ORDER, CHEBY_STOP_DB, CHEBY_BAND_HZ, btype="bandpass", output="ba", fs=fs)
    return ba_filtfilt(x, b, a)


def butter_bandpass_sos(
    x: ArrayLike, fs: float, band: tuple[float, float], order: int, ringing_pad: bool = False,
) -> Tensor:
    """Butterworth band-pass, zero-phase SOS (AnyPPG, SigmaPPG); ``ringing_pad``: pad as MNE does."""
    _check_band(band, fs)
    sos = signal.butter(order, band, btype="bandpass", output="sos", fs=fs)
    return sos_filtfilt(x, sos, butter_ringing_samples(fs, band, order) if ringing_pad else None)


def moving_average_smooth(x: ArrayLike, fs: float) -> Tensor:
    """50 ms moving average (``round(0.05 * fs)`` taps), forward-backward; identity below 75 Hz (pyPPG's rule)."""
    taps = int(round(SMOOTH_SECONDS * fs))
    if fs < SMOOTH_MIN_FS or taps <= 1:
        return _as_tensor(*_as_numpy(x))
    b = np.full(taps, 1.0 / taps)
    return ba_filtfilt(x, b, np.array([1.0]))


def zscore_window(x: ArrayLike, eps: float = STD_EPS) -> Tensor:
    """Per-window z-score: subtract the mean, divide by the population std plus ``eps``."""
    arr, device = _as_numpy(x)
    mean = arr.mean(axis=-1, keepdims=True)
    std = arr.std(axis=-1, keepdims=True)
    return _as_tensor((arr - mean) / (std + eps), device)


def zscore_group(
    x: ArrayLike, ppg_mean: ArrayLike | float, ppg_std: ArrayLike | float, eps: float = STD_EPS
) -> Tensor:
    """Z-score with the subject-level statistics (one mean/std per window, or one for all)."""
    arr, device = _as_numpy(x)
    # One statistic per window ([B] or [B, 1]) broadcasts over time; a scalar applies to all.
    mean, std = (s.reshape(s.shape + (1,) * (arr.ndim - s.ndim)) if s.ndim else s
                 for s in (_as_numpy(ppg_mean)[0], _as_numpy(ppg_std)[0]))
    return _as_tensor((arr - mean) / (std + eps), device)


def minmax_window(x: ArrayLike, unit: bool = False) -> Tensor:
    """Per-window min-max scaling to [-1, 1] (``unit``: to [0, 1]); a flat window becomes all zeros."""
    arr, device = _as_numpy(x)
    low = arr.min(axis=-1, keepdims=True)
    span = arr.max(axis=-1, keepdims=True) - low
    flat = span == 0
    den = np.where(flat, 1.0, span)
    scaled = (arr - low) / den if unit else 2.0 * (arr - low) / den - 1.0
    return _as_tensor(np.where(flat, 0.0, scaled), device)
