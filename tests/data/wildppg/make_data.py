"""Tiny WildPPG raw data: ``WildPPG_Part_<name>.mat`` with a wrist green PPG and a sternum ECG.

The ECG is built from Gaussian P/QRS/T waves at known beat times, so the window HR a correct R-peak
pipeline must find is known: 60 x (intervals with midpoint inside the window) / (their sum in s).
Run ``python tests/data/wildppg/make_data.py <folder>`` to write it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from scipy.io import savemat

WINDOW_S = 8.0
#: (offset s, amplitude, width s) of the P, Q, R, S and T waves around each beat.
_WAVES = (
    (-0.18, 0.12, 0.025),
    (-0.03, -0.12, 0.008),
    (0.0, 1.0, 0.012),
    (0.03, -0.25, 0.01),
    (0.28, 0.3, 0.05),
)


def beat_times(duration_s: float, hr_mean: float, hr_swing: float, period_s: float = 40.0) -> np.ndarray:
    """Beat times (s) of a heart rate that swings sinusoidally around ``hr_mean`` bpm."""
    times = [0.4]
    while True:
        hr = hr_mean + hr_swing * np.sin(2 * np.pi * times[-1] / period_s)
        nxt = times[-1] + 60.0 / hr
        if nxt > duration_s - 0.4:
            return np.asarray(times)
        times.append(nxt)


def synth_ecg(
    beats: np.ndarray, fs: float, duration_s: float, rng: np.random.Generator, noise: float = 0.01
) -> np.ndarray:
    """ECG with P-QRS-T waves at ``beats`` (s), slight baseline wander and white noise."""
    t = np.arange(int(round(duration_s * fs))) / fs
    ecg = 0.05 * np.sin(2 * np.pi * 0.25 * t) + noise * rng.standard_normal(len(t))
    for beat in beats:
        near = slice(max(0, int((beat - 0.4) * fs)), min(len(t), int((beat + 0.6) * fs)))
        for offset, amp, width in _WAVES:
            ecg[near] += amp * np.exp(-0.5 * ((t[near] - beat - offset) / width) ** 2)
    return ecg


def synth_ppg(beats: np.ndarray, fs: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Pulse wave (systolic peak and a smaller diastolic wave) 0.25 s after each beat, plus noise."""
    t = np.arange(int(round(duration_s * fs))) / fs
    ppg = 0.02 * rng.standard_normal(len(t))
    for beat in beats:
        ppg += np.exp(-0.5 * ((t - beat - 0.25) / 0.09) ** 2)
        ppg += 0.4 * np.exp(-0.5 * ((t - beat - 0.55) / 0.1) ** 2)
    return 1000.0 + 200.0 * ppg


def expected_hr(beats: np.ndarray, n_windows: int, window_s: float = WINDOW_S) -> np.ndarray:
    """Window HR from true beat times: intervals whose midpoint lies strictly inside, NaN below 2."""
    intervals = np.diff(beats)
    mids = (beats[1:] + beats[:-1]) / 2
    out = np.full(n_windows, np.nan)
    for i in range(n_windows):
        inside = (mids > i * window_s) & (mids < (i + 1) * window_s)
        if inside.sum() >= 2:
            out[i] = 60.0 * inside.sum() / intervals[inside].sum()
    return out


def _write_mat73(path: Path, wrist: dict[str, Any], sternum: dict[str, Any]) -> None:
    """A MATLAB v7.3 file (HDF5 with the 512-byte MATLAB header), as MATLAB's ``-v7.3`` writes."""
    with h5py.File(path, "w", userblock_size=512) as handle:
        for name, struct in (("wrist", wrist), ("sternum", sternum)):
            for field, sub in struct.items():
                for key, value in sub.items():
                    handle[f"{name}/{field}/{key}"] = np.atleast_2d(np.asarray(value, dtype=np.float64))
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024"
    header += b" HDF5 schema 1.00 ."
    with path.open("r+b") as handle:
        handle.write(header.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02" + b"IM")


def make(
    root: Path,
    seed: int = 0,
    *,
    names: tuple[str, ...] = ("an0", "bn1", "cn2"),
    duration_s: float = 80.0,
    ppg_fs: float = 128.0,
    ecg_fs: float = 128.0,
    mat73: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Write the tiny dataset under ``root`` and return what the tests expect per participant.

    Participant 0 is clean; participant 1 has NaN PPG in the middle of window 3 (dropped); participant
    2 has a flat ECG from 40 s to 64 s (windows 5-7 keep their PPG but get no HR label).

    Args:
        root: Folder to write into (created).
        seed: Seed of the noise.
        names: Participant suffixes (``WildPPG_Part_<name>.mat``).
        duration_s: Recording length.
        ppg_fs: Rate stored in ``wrist.ppg_g.fs`` (a non-integer one must be refused).
        ecg_fs: Rate of ``sternum.ecg``.
        mat73: Names written as MATLAB v7.3 (HDF5) instead of v5.

    Returns:
        ``{name: {"n_windows", "kept", "hr"}}`` with the expected HR of the kept windows.
    """
    rng = np.random.default_rng(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    n_windows = int(duration_s // WINDOW_S)
    expected: dict[str, Any] = {}
    for k, name in enumerate(names):
        beats = beat_times(duration_s, hr_mean=65.0 + 12 * k, hr_swing=8.0 + 2 * k)
        ecg = synth_ecg(beats, ecg_fs, duration_s, rng)
        ppg = synth_ppg(beats, ppg_fs, duration_s, rng)
        kept = np.arange(n_windows)
        hr = expected_hr(beats, n_windows)
        if k == 1:
            mid = int(3.5 * WINDOW_S * ppg_fs)
            ppg[mid - 5 : mid + 5] = np.nan
            kept = kept[kept != 3]
        if k == 2:
            ecg[int(40 * ecg_fs) : int(64 * ecg_fs)] = 0.0
            hr[5:8] = np.nan
        wrist = {"ppg_g": {"v": ppg, "fs": ppg_fs}, "ppg_ir": {"v": ppg[::-1].copy(), "fs": ppg_fs}}
        sternum = {"ecg": {"v": ecg, "fs": ecg_fs}}
        path = root / f"WildPPG_Part_{name}.mat"
        if name in mat73:
            _write_mat73(path, wrist, sternum)
        else:
            savemat(path, {"id": name, "wrist": wrist, "sternum": sternum})
        expected[name] = {"n_windows": n_windows, "kept": kept, "hr": hr[kept]}
    return expected


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else "wildppg_raw"))
