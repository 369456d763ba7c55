"""Pulse-rate-variability controls (#3): NeuroKit2 features as the paper states them, and the protocol's SciPy ones."""

from __future__ import annotations

import functools
import warnings
from typing import ClassVar

import numpy as np
import torch
from joblib import Parallel, delayed, effective_n_jobs
from scipy.signal import find_peaks, welch
from torch import Tensor

from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import PPGBenchError

NEUROKIT_FEATURES = (
    "n_beats", "hr_bpm", "mean_nn", "median_nn", "sdnn", "rmssd", "sdsd", "cvnn", "pnn50", "pnn20", "min_nn", "max_nn",
)
PUBLISHED_FEATURES = ("mean_nn", "hr_bpm", "sdnn", "rmssd", "pnn50", "lf", "hf", "lf_hf")


class FeatureEncoder(PPGEncoder):
    """Base of parameter-free feature controls: a per-window NumPy function run in parallel.

    Args:
        n_jobs: Worker processes for feature extraction (joblib; -1 = all cores, 1 = in-process).
    """

    trainable = False
    feature_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, n_jobs: int = -1) -> None:
        super().__init__()
        self.n_jobs = n_jobs

    def window_features(self, window: np.ndarray) -> np.ndarray:
        """Features of one window (0 where one cannot be computed)."""
        raise NotImplementedError

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """No network input transform: features are computed on the raw window."""
        return x

    def forward_features(self, x: Tensor) -> Tensor:
        """Features of every window, computed in parallel chunks on the CPU."""
        windows = x.detach().cpu().double().numpy().reshape(len(x), -1)
        n_jobs = 1 if len(windows) < 32 else self.n_jobs
        chunks = np.array_split(windows, max(1, min(len(windows), 4 * effective_n_jobs(n_jobs))))
        rows = Parallel(n_jobs=n_jobs)(delayed(self._chunk)(c) for c in chunks if len(c))
        features = np.concatenate(rows) if rows else np.zeros((0, self.embed_dim))
        return torch.as_tensor(features, dtype=torch.float32, device=x.device)

    def _chunk(self, windows: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.stack([self.window_features(w) for w in windows])


#: The check's clean pulse: 72 bpm for 10 s at 100 Hz, so NN intervals of 833 ms.
CHECK_BPM, CHECK_SECONDS = 72.0, 10.0


@functools.cache
def check_neurokit(fs: int = 100) -> None:
    """Refuse, once per process, a NeuroKit2 that cannot measure a clean pulse (else every feature would be 0)."""
    import neurokit2 as nk  # deferred: importing neurokit2 costs seconds

    t = np.arange(int(CHECK_SECONDS * fs)) / fs
    pulse = sum(np.exp(-0.5 * ((t - b) / 0.05) ** 2) for b in np.arange(0.3, CHECK_SECONDS, 60.0 / CHECK_BPM))
    expected_nn = 60000.0 / CHECK_BPM
    version = getattr(nk, "__version__", "?")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peaks = np.asarray(nk.ppg_findpeaks(nk.ppg_clean(pulse, sampling_rate=fs), sampling_rate=fs)["PPG_Peaks"])
            mean_nn = float(nk.hrv_time(peaks.astype(int), sampling_rate=fs).iloc[0]["HRV_MeanNN"])
    except Exception as exc:  # noqa: BLE001 - whatever NeuroKit2 raises, the control cannot run
        raise PPGBenchError(f"prv_neurokit2: NeuroKit2 {version} fails on a clean {CHECK_BPM:.0f}-bpm synthetic "
                            f"pulse ({type(exc).__name__}: {exc}); every window would get zero features. "
                            "Install a working neurokit2 or use the prv_published control") from exc
    if not abs(mean_nn - expected_nn) <= 0.05 * expected_nn:
        raise PPGBenchError(f"prv_neurokit2: NeuroKit2 {version} measures a clean {CHECK_BPM:.0f}-bpm synthetic "
                            f"pulse as mean NN {mean_nn:.0f} ms (expected {expected_nn:.0f} ms, {len(peaks)} "
                            "peaks found); its features would be wrong. Install a working neurokit2 or use the "
                            "prv_published control")


class PRVEncoder(FeatureEncoder):
    """NeuroKit2 pulse-rate-variability features (12 time-domain values per window)."""

    feature_names = NEUROKIT_FEATURES

    def forward_features(self, x: Tensor) -> Tensor:
        """Check NeuroKit2 once per process (:func:`check_neurokit`), then every window's features."""
        check_neurokit(int(self.sampling_rate))
        return super().forward_features(x)

    def window_features(self, window: np.ndarray) -> np.ndarray:
        """Clean, find pulse peaks (Elgendi) and compute NeuroKit2's time-domain HRV indices."""
        import neurokit2 as nk  # deferred: importing neurokit2 costs seconds

        out = np.zeros(len(NEUROKIT_FEATURES))
        if len(window) < self.sampling_rate or not np.isfinite(window).all() or window.std() <= 1e-8:
            return out
        fs = int(self.sampling_rate)
        try:
            cleaned = nk.ppg_clean(window, sampling_rate=fs)
            peaks = np.asarray(nk.ppg_findpeaks(cleaned, sampling_rate=fs)["PPG_Peaks"], dtype=int)
        except Exception:  # noqa: BLE001 - NeuroKit2 raises assorted errors on degenerate windows
            return out
        out[0] = len(peaks)
        if len(peaks) < 2:
            return out
        nn = np.diff(peaks) / fs * 1000.0
        out[1] = 60000.0 / nn.mean()
        if len(peaks) >= 3:
            try:
                hrv = nk.hrv_time(peaks, sampling_rate=fs).iloc[0]
            except Exception:  # noqa: BLE001
                hrv = None
            if hrv is not None:
                names = ("MeanNN", "MedianNN", "SDNN", "RMSSD", "SDSD", "CVNN", "pNN50", "pNN20", "MinNN", "MaxNN")
                out[2:] = [float(hrv.get(f"HRV_{n}", np.nan)) for n in names]
        else:
            out[2] = out[3] = out[10] = out[11] = nn.mean()
        return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0)


class PublishedPRVEncoder(FeatureEncoder):
    """The published protocol's SciPy PRV control (PROTOCOL.md 5.2), reproduced for comparability."""

    feature_names = PUBLISHED_FEATURES

    def window_features(self, window: np.ndarray) -> np.ndarray:
        """Peaks on the z-scored window (or its inverse), NN statistics, LF/HF when long enough."""
        fs = self.sampling_rate
        out = np.zeros(len(PUBLISHED_FEATURES))
        if len(window) < max(3, fs) or not np.isfinite(window).all() or window.std() <= 1e-8:
            return out
        z = (window - window.mean()) / window.std()
        kwargs = {"distance": max(1, int(np.floor(0.30 * fs))), "prominence": max(0.1, 0.25 * z.std())}
        upright, _ = find_peaks(z, **kwargs)
        inverted, _ = find_peaks(-z, **kwargs)
        peaks = upright if len(upright) >= len(inverted) else inverted
        if len(peaks) < 3:
            return out
        nn = np.diff(peaks) / fs * 1000.0
        nn = nn[(nn >= 300) & (nn <= 2000)]
        if len(nn) < 2:
            return out
        diffs = np.diff(nn)
        out[0] = nn.mean()
        out[1] = 60000.0 / nn.mean()
        out[2] = nn.std(ddof=1)
        out[3] = np.sqrt(np.mean(diffs**2)) if len(diffs) else 0.0
        out[4] = 100.0 * np.mean(np.abs(diffs) > 50) if len(diffs) else 0.0
        if len(nn) >= 30 and nn.sum() >= 120_000:
            out[5:] = _lf_hf(nn)
        return out


def _lf_hf(nn_ms: np.ndarray) -> tuple[float, float, float]:
    """LF and HF power of the NN series interpolated at 4 Hz (Welch, trapezoid), and LF/HF."""
    t = np.cumsum(nn_ms) / 1000.0
    grid = np.arange(t[0], t[-1], 0.25)
    series = np.interp(grid, t, nn_ms)
    series = series - series.mean()
    freqs, power = welch(series, fs=4.0, nperseg=min(256, len(series)))

    def band(lo: float, hi: float) -> float:
        mask = (freqs >= lo) & (freqs < hi)
        return float(np.trapezoid(power[mask], freqs[mask])) if mask.sum() > 1 else 0.0

    lf, hf = band(0.04, 0.15), band(0.15, 0.40)
    return lf, hf, (lf / hf if hf > 1e-8 else 0.0)
