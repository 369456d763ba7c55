"""Native preprocessing: filters pass the pulse band and reject the rest, normalisations, short windows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy import signal
from torch import Tensor

from ppgbench_pl.encoders import preprocessing as pp


def _sine(freq: float, fs: float, seconds: float = 20.0, batch: int = 2) -> np.ndarray:
    t = np.arange(int(seconds * fs)) / fs
    return np.tile(np.sin(2 * np.pi * freq * t), (batch, 1))


def _gain(x: np.ndarray, y: Tensor) -> float:
    """RMS ratio output/input on the middle half (away from the edges)."""
    n = x.shape[-1]
    mid = slice(n // 4, 3 * n // 4)
    out = y.numpy()
    return float(np.sqrt((out[:, mid] ** 2).mean() / (x[:, mid] ** 2).mean()))


FILTERS: dict[str, tuple[Callable[[np.ndarray], Tensor], float, list[float], list[float]]] = {
    # name: (filter at its model's rate, fs, pass-band test tones, stop-band test tones)
    "cheby_sos_125": (lambda x: pp.cheby2_bandpass_sos(x, 125.0), 125.0, [1.0, 3.0, 5.0], [0.1, 15.0, 30.0]),
    "cheby_ba_50": (lambda x: pp.cheby2_bandpass_ba(x, 50.0), 50.0, [1.0, 3.0, 5.0], [0.1, 15.0, 20.0]),
    "butter3_125": (lambda x: pp.butter_bandpass_sos(x, 125.0, (0.5, 8.0), 3), 125.0, [1.5, 3.0],
                    [0.05, 20.0, 40.0]),
    "butter2_50": (lambda x: pp.butter_bandpass_sos(x, 50.0, (0.5, 8.0), 2), 50.0, [1.5, 3.0], [0.02, 22.0]),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_bandpass_passes_pulse_band_and_rejects_outside(name: str) -> None:
    fn, fs, passing, stopped = FILTERS[name]
    for freq in passing:
        x = _sine(freq, fs)
        assert _gain(x, fn(x)) > 0.9, f"{name}: {freq} Hz should pass"
    for freq in stopped:
        x = _sine(freq, fs)
        assert _gain(x, fn(x)) < 0.1, f"{name}: {freq} Hz should be attenuated"


def test_filters_return_float32_torch_with_input_shape_for_numpy_and_torch() -> None:
    x = np.random.default_rng(0).standard_normal((2, 500))
    for inp in (x, torch.from_numpy(x).float()):
        out = pp.cheby2_bandpass_sos(inp, 125.0)
        assert isinstance(out, Tensor) and out.dtype == torch.float32 and out.shape == (2, 500)


def test_long_windows_equal_scipy_defaults() -> None:
    x = np.random.default_rng(1).standard_normal((2, 500))
    sos = signal.cheby2(4, 20, (0.5, 12.0), btype="bandpass", output="sos", fs=125.0)
    np.testing.assert_allclose(pp.cheby2_bandpass_sos(x, 125.0).numpy(), signal.sosfiltfilt(sos, x, axis=-1),
                               rtol=1e-5, atol=1e-5)
    b, a = signal.cheby2(4, 20, (0.5, 12.0), btype="bandpass", fs=50.0)
    np.testing.assert_allclose(pp.cheby2_bandpass_ba(x, 50.0).numpy(), signal.filtfilt(b, a, x, axis=-1),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length", [2, 10, 27, 105, 263])
def test_short_windows_do_not_crash(length: int) -> None:
    x = np.random.default_rng(length).standard_normal((2, length))
    outputs = [
        pp.cheby2_bandpass_sos(x, 125.0),
        pp.cheby2_bandpass_ba(x, 50.0),
        pp.butter_bandpass_sos(x, 125.0, (0.5, 8.0), 3),
        pp.butter_bandpass_sos(x, 50.0, (0.5, 8.0), 2),
        pp.moving_average_smooth(x, 125.0),
    ]
    for out in outputs:
        assert out.shape == (2, length) and torch.isfinite(out).all()


def test_band_above_nyquist_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="fs/2"):
        pp.cheby2_bandpass_sos(np.zeros((1, 100)), 20.0)


def test_smoother_only_at_75_hz_and_above() -> None:
    x = np.random.default_rng(2).standard_normal((2, 400))
    np.testing.assert_allclose(pp.moving_average_smooth(x, 50.0).numpy(), x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(pp.moving_average_smooth(x, 64.0).numpy(), x, rtol=1e-6, atol=1e-6)
    smoothed = pp.moving_average_smooth(x, 125.0).numpy()
    b = np.full(6, 1 / 6)  # round(0.05 * 125) = 6 taps
    np.testing.assert_allclose(smoothed, signal.filtfilt(b, [1.0], x, axis=-1), rtol=1e-5, atol=1e-5)
    fast = _sine(40.0, 125.0)
    assert _gain(fast, pp.moving_average_smooth(fast, 125.0)) < 0.2
    slow = _sine(1.0, 125.0)
    assert _gain(slow, pp.moving_average_smooth(slow, 125.0)) > 0.95


def test_zscore_window_gives_zero_mean_unit_std() -> None:
    x = 3.0 + 5.0 * np.random.default_rng(3).standard_normal((2, 263))
    out = pp.zscore_window(torch.from_numpy(x)).double()
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, dtype=torch.float64), atol=1e-5, rtol=0)
    std = out.std(-1, unbiased=False)
    torch.testing.assert_close(std, torch.ones(2, dtype=torch.float64), atol=1e-5, rtol=0)
    assert torch.isfinite(pp.zscore_window(np.zeros((1, 50)))).all()  # flat window: eps avoids 0/0


def test_zscore_group_uses_the_given_statistics() -> None:
    x = np.array([[1.0, 3.0, 5.0], [10.0, 20.0, 30.0]])
    out = pp.zscore_group(x, torch.tensor([3.0, 20.0]), torch.tensor([2.0, 10.0]))
    torch.testing.assert_close(out, torch.tensor([[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]]), atol=1e-5, rtol=0)
    scalar = pp.zscore_group(x, 3.0, 2.0)
    torch.testing.assert_close(scalar[0], torch.tensor([-1.0, 0.0, 1.0]), atol=1e-5, rtol=0)
    column = pp.zscore_group(x, np.array([[3.0], [20.0]]), np.array([[2.0], [10.0]]))
    torch.testing.assert_close(column, out)


def test_minmax_window_scales_to_unit_range_and_zeroes_flat_windows() -> None:
    x = np.stack([np.linspace(-7.0, 4.0, 100), np.full(100, 2.5)])
    out = pp.minmax_window(x)
    assert out[0].min().item() == pytest.approx(-1.0) and out[0].max().item() == pytest.approx(1.0)
    assert torch.equal(out[1], torch.zeros(100))
