"""R-peak detection and window heart rate from an ECG, as the WildPPG authors label their data (PROTOCOL.md 1.10)."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import maximum_filter1d
from scipy.signal import butter, find_peaks, sosfiltfilt

#: Highest band edge used (refinement band-pass); the ECG rate must exceed twice this.
_MAX_BAND_HZ = 20.0
#: Threshold weights and limits of the detector (PROTOCOL.md 1.10 step 2).
_LEVEL_WEIGHT = 0.125
_MISSED_FACTOR = 1.66
_RESET_S = 4.0


def _bandpass(x: np.ndarray, low: float, high: float, fs: int) -> np.ndarray:
    """Zero-phase 1st-order Butterworth band-pass (SOS, forward-backward)."""
    sos = butter(1, [low, high], btype="bandpass", fs=fs, output="sos")
    return np.asarray(sosfiltfilt(sos, x), dtype=np.float64)


def _check_rate(fs: int) -> int:
    """The detector's bands need an integer rate above twice the highest band edge."""
    if int(fs) != fs or fs <= 2 * _MAX_BAND_HZ:
        raise ValueError(f"ECG rate {fs} Hz must be an integer above {2 * _MAX_BAND_HZ:g} Hz")
    return int(fs)


def detection_signal(ecg: np.ndarray, fs: int) -> np.ndarray:
    """Energy of the QRS band, capped by an amplitude envelope, start blanked; one sample shorter than ``ecg``."""
    fs = _check_rate(fs)
    band = _bandpass(np.asarray(ecg, dtype=np.float64), 5.0, 15.0, fs)
    width = max(1, int(0.15 * fs))
    energy = np.convolve(np.diff(band) ** 2, np.ones(width) / width, mode="same")
    envelope = maximum_filter1d(band, size=width)[: len(energy)] / 400.0
    detection = np.minimum(energy, envelope)
    detection[: int(0.3 * fs)] = 0.0
    return detection


def pick_beats(detection: np.ndarray, fs: int) -> np.ndarray:
    """Increasing beat indices into ``detection``: adaptive thresholds with search-back and threshold reset."""
    fs = _check_rate(fs)
    min_gap = max(1, int(0.25 * fs))
    refractory = 0.3 * fs
    reset_len = int(_RESET_S * fs)
    candidates, _ = find_peaks(detection, distance=min_gap)
    beats: list[int] = [0]  # dummy first beat, as in the published detector
    spki = npki = 0.0
    missed_limit: float | None = None
    for peak in candidates.tolist():
        threshold1 = npki + 0.25 * (spki - npki)
        if peak > reset_len:
            recent = detection[peak - reset_len : peak]
            recent_max = float(recent.max())
            if threshold1 > recent_max:
                npki = 0.0 if spki == 0 else min(npki * recent_max / spki, float(np.percentile(recent, 80)))
                spki = recent_max
                threshold1 = npki + 0.25 * (spki - npki)
        threshold2 = threshold1 / 2
        value = float(detection[peak])
        if value > threshold1 and peak - beats[-1] > refractory:
            spki = _LEVEL_WEIGHT * value + (1 - _LEVEL_WEIGHT) * spki
            previous = beats[-1]
            if missed_limit is not None and peak - previous > missed_limit:  # search back: the highest
                # candidate between the two beats, clear of both, above threshold2
                between = candidates[(candidates > previous + min_gap) & (candidates < peak - min_gap)]
                between = between[detection[between] > threshold2]
                if len(between):
                    beats.append(int(between[np.argmax(detection[between])]))
            beats.append(peak)
        else:
            npki = _LEVEL_WEIGHT * value + (1 - _LEVEL_WEIGHT) * npki
        if len(beats) > 8:
            missed_limit = _MISSED_FACTOR * float(np.mean(np.diff(beats[-9:])))
    return np.asarray(beats[1:], dtype=np.int64)


def refine_beats(ecg: np.ndarray, beats: np.ndarray, fs: int) -> np.ndarray:
    """Move each beat to the R-peak: 7.5-20 Hz band maximum within 0.15 s, then raw maximum within 2 samples."""
    fs = _check_rate(fs)
    raw = np.asarray(ecg, dtype=np.float64)
    band = _bandpass(raw, 7.5, _MAX_BAND_HZ, fs)
    half = int(0.15 * fs)
    refined = np.empty(len(beats), dtype=np.int64)
    for i, beat in enumerate(np.asarray(beats, dtype=np.int64).tolist()):
        lo = max(0, beat - half)
        coarse = lo + int(np.argmax(band[lo : beat + half + 1]))
        lo = max(0, coarse - 2)
        refined[i] = lo + int(np.argmax(raw[lo : coarse + 3]))
    return refined


def quality_intervals(beats: np.ndarray, fs: int, group: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """RR intervals (samples, float64) that pass the 5-beat regularity gate, with their midpoints."""
    beats = np.asarray(beats, dtype=np.int64)
    intervals: list[float] = []
    midpoints: list[float] = []
    last: int | None = None
    for start in range(len(beats) - group + 1):
        members = beats[start : start + group]
        gaps = np.diff(members)
        shortest, longest = float(gaps.min()), float(gaps.max())
        if not shortest > 0.75 * longest:
            continue
        if not 35.0 < 60.0 * fs / float(gaps.mean()) < 185.0:
            continue
        for beat in members.tolist():
            if last is not None and beat <= last:
                continue
            if last is not None and 0.75 * longest < beat - last < shortest / 0.75:
                intervals.append(float(beat - last))
                midpoints.append((beat + last) / 2.0)
            last = beat
    return np.asarray(intervals, dtype=np.float64), np.asarray(midpoints, dtype=np.float64)


def window_hr(
    intervals: np.ndarray, midpoints: np.ndarray, fs: float, starts: np.ndarray, length: float
) -> np.ndarray:
    """HR (bpm) per window (``starts``, ``length`` in ECG samples) from the intervals inside; NaN below 2."""
    starts = np.asarray(starts, dtype=np.float64)
    first = np.searchsorted(midpoints, starts, side="right")
    stop = np.searchsorted(midpoints, starts + length, side="left")
    cumulative = np.concatenate([[0.0], np.cumsum(intervals)])
    count = stop - first
    total_s = (cumulative[stop] - cumulative[first]) / fs
    hr = np.full(len(starts), np.nan)
    ok = count >= 2
    hr[ok] = 60.0 * count[ok] / total_s[ok]
    return hr


def detect_rpeaks(ecg: np.ndarray, fs: int) -> np.ndarray:
    """Full R-peak pipeline (detection signal, picking, refinement) on one ECG."""
    fs = _check_rate(fs)
    ecg = np.asarray(ecg, dtype=np.float64)
    if len(ecg) < 2 * fs:
        return np.zeros(0, dtype=np.int64)
    return refine_beats(ecg, pick_beats(detection_signal(ecg, fs), fs), fs)


def ecg_window_hr(
    ecg: np.ndarray, fs: int, window_s: float, n_windows: int, stride_s: float | None = None
) -> np.ndarray:
    """HR (bpm) of the ``window_s`` windows every ``stride_s`` s (default ``window_s``); NaN below 2 intervals."""
    intervals, midpoints = quality_intervals(detect_rpeaks(ecg, fs), fs)
    stride = (window_s if stride_s is None else stride_s) * fs
    return window_hr(intervals, midpoints, fs, np.arange(n_windows) * stride, window_s * fs)
