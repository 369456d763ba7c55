"""WildPPG ECG R-peak/HR pipeline (PROTOCOL.md 1.10) on ECGs whose beats and HR are known."""

from __future__ import annotations

import numpy as np
import pytest

from ppgbench_pl.data.datasets import ecg_hr
from tests.data.wildppg.make_data import beat_times, expected_hr, synth_ecg


def _regular_beats(rr_s: float, duration_s: float, first: float = 0.5) -> np.ndarray:
    return np.arange(first, duration_s - 0.5, rr_s)


@pytest.mark.parametrize("fs", [128, 250, 500])
def test_constant_rr_gives_the_known_hr(fs: int) -> None:
    beats = _regular_beats(0.8, 64.0)
    ecg = synth_ecg(beats, fs, 64.0, np.random.default_rng(0))
    peaks = ecg_hr.detect_rpeaks(ecg, fs)
    assert len(peaks) == len(beats)
    assert np.abs(peaks / fs - beats).max() <= 2.0 / fs
    hr = ecg_hr.ecg_window_hr(ecg, fs, 8.0, 8)
    np.testing.assert_allclose(hr, 75.0, atol=0.5)


@pytest.mark.parametrize("fs", [128, 256])
def test_varying_hr_matches_the_hr_of_the_true_beats(fs: int) -> None:
    beats = beat_times(96.0, hr_mean=80.0, hr_swing=15.0, period_s=30.0)
    ecg = synth_ecg(beats, fs, 96.0, np.random.default_rng(1))
    hr = ecg_hr.ecg_window_hr(ecg, fs, 8.0, 12)
    expected = expected_hr(beats, 12)
    assert np.isfinite(hr).all()
    np.testing.assert_allclose(hr, expected, atol=0.5)
    assert np.ptp(expected) > 10  # the HR really varies across windows


def test_neurokit_simulated_ecg() -> None:
    nk = pytest.importorskip("neurokit2")
    ecg = nk.ecg_simulate(
        duration=64, sampling_rate=250, heart_rate=70, noise=0.01, random_state=1, method="simple"
    )
    hr = ecg_hr.ecg_window_hr(np.asarray(ecg), 250, 8.0, 8)
    np.testing.assert_allclose(hr, 70.0, atol=1.5)


def test_detection_signal_shape_and_blanked_start() -> None:
    fs = 200
    ecg = synth_ecg(_regular_beats(0.7, 10.0, first=0.1), fs, 10.0, np.random.default_rng(2))
    det = ecg_hr.detection_signal(ecg, fs)
    assert det.shape == (len(ecg) - 1,)
    assert not det[: int(0.3 * fs)].any()
    assert det[int(0.3 * fs) :].max() > 0


def test_search_back_inserts_a_missed_beat_above_threshold2() -> None:
    fs = 100  # refractory 30, candidate spacing 25 samples
    det = np.zeros(3000)
    beats = list(range(50, 2950, 100))
    for b in beats:
        det[b] = 1.0
    weak = 1250  # replaces the spike there: below threshold1 (~0.2), above threshold2 (~0.1)
    det[weak] = 0.15
    det[1850] = 0.0
    det[1830] = 0.02  # below threshold2: never inserted
    found = ecg_hr.pick_beats(det, fs)
    assert weak in found
    assert 1830 not in found
    assert set(found) == set(beats) - {1850}


def test_threshold_reset_recovers_after_an_amplitude_drop(monkeypatch: pytest.MonkeyPatch) -> None:
    fs = 128
    beats = beat_times(96.0, hr_mean=70.0, hr_swing=5.0)
    ecg = synth_ecg(beats, fs, 96.0, np.random.default_rng(1), noise=0.002)
    ecg[int(40 * fs) :] *= 0.1
    expected = expected_hr(beats, 12)
    hr = ecg_hr.ecg_window_hr(ecg, fs, 8.0, 12)
    np.testing.assert_allclose(hr[6:], expected[6:], atol=0.5)
    monkeypatch.setattr(ecg_hr, "_RESET_S", 1e9)  # without the reset the detector stays deaf
    assert np.isnan(ecg_hr.ecg_window_hr(ecg, fs, 8.0, 12)[6:]).all()


def test_quality_gate_drops_intervals_around_an_ectopic_beat() -> None:
    fs = 100
    beats = np.arange(20) * 100 + 50
    beats[10] -= 40  # premature beat
    intervals, mids = ecg_hr.quality_intervals(beats, fs)
    assert len(intervals) == 19 - 2
    assert set(intervals.tolist()) == {100.0}
    assert not ((mids > beats[9]) & (mids < beats[11])).any()


@pytest.mark.parametrize("rr", [2.0, 0.3])  # 30 bpm and 200 bpm lie outside (35, 185)
def test_quality_gate_rejects_implausible_rates(rr: float) -> None:
    fs = 100
    intervals, _ = ecg_hr.quality_intervals((np.arange(12) * rr * fs).astype(np.int64), fs)
    assert len(intervals) == 0


def test_window_hr_counts_midpoints_strictly_inside_and_needs_two() -> None:
    fs = 100.0
    intervals = np.array([100.0, 100.0, 50.0, 80.0])
    mids = np.array([100.0, 250.0, 400.0, 799.0])
    hr = ecg_hr.window_hr(intervals, mids, fs, starts=np.array([0.0, 100.0, 400.0, 700.0]), length=400.0)
    # window 0 (0, 400): mids 100 and 250 -> 2 intervals of 1 s -> 60 bpm
    # window 1 (100, 500): 250 and 400 (100 is on the edge) -> 60 * 2 / 1.5 s
    # window 2 (400, 800): only 799 (400 on the edge) -> NaN; window 3: only 799 -> NaN
    np.testing.assert_allclose(hr[:2], [60.0, 80.0])
    assert np.isnan(hr[2:]).all()


def test_short_or_flat_ecg_gives_no_label() -> None:
    assert np.isnan(ecg_hr.ecg_window_hr(np.zeros(100), 128, 8.0, 2)).all()
    assert np.isnan(ecg_hr.ecg_window_hr(np.zeros(128 * 20), 128, 8.0, 2)).all()


def test_rate_too_low_for_the_bands_is_refused() -> None:
    with pytest.raises(ValueError, match="40"):
        ecg_hr.detect_rpeaks(np.zeros(1000), 32)
