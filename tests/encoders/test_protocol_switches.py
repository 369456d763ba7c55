"""Encoder switches to the authors' input handling (issue 31, item 6): AnyPPG's MNE filter padding, SigmaPPG's
[0, 1] scaling and filter-then-crop order. The published behaviour is the default; a switched-on one changes
the settings digest and is listed in the encoder's ``deviations``, which every record carries."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import signal

from ppgbench_pl.benchmark.cache import EmbeddingCache, encoder_identity
from ppgbench_pl.encoders import anyppg, sigmappg
from ppgbench_pl.encoders.anyppg import AnyPPGEncoder
from ppgbench_pl.encoders.preprocessing import butter_bandpass_sos, butter_ringing_samples, minmax_window
from ppgbench_pl.encoders.sigmappg import SigmaPPGEncoder
from ppgbench_pl.errors import ConfigError


def pulse(n: int, fs: float, seed: int = 0) -> np.ndarray:
    """A PPG-like test signal: 1.3 Hz pulse, harmonic, slow drift, offset and noise."""
    t = np.arange(n) / fs
    rng = np.random.default_rng(seed)
    return (500 + 40 * np.sin(2 * np.pi * 1.3 * t) + 12 * np.sin(2 * np.pi * 2.6 * t + 0.4)
            + 30 * t + rng.normal(0, 2, n))


def mne_style_reference(x: np.ndarray, fs: float, padlen: int) -> np.ndarray:
    """Forward-backward filtering written out by hand in transfer-function form, as MNE's IIR filter with
    ``output='ba'`` (the authors' call) does it: odd reflection of ``padlen`` samples at each end, each pass
    started from the filter's steady state scaled by its first sample, then the padding cut off."""
    b, a = signal.butter(3, anyppg.BAND_HZ, btype="bandpass", output="ba", fs=fs)
    padlen = min(padlen, len(x) - 1)
    ext = np.concatenate([2 * x[0] - x[padlen:0:-1], x, 2 * x[-1] - x[-2:-padlen - 2:-1]])
    zi = signal.lfilter_zi(b, a)
    forward, _ = signal.lfilter(b, a, ext, zi=zi * ext[0])
    backward, _ = signal.lfilter(b, a, forward[::-1], zi=zi * forward[-1])
    return backward[::-1][padlen:len(ext) - padlen]


def test_anyppg_pad_length_is_mnes_ringing_estimate() -> None:
    """427 samples for the authors' Butterworth(3) 0.5-8 Hz at 125 Hz (measured beside their MNE filter):
    the last impulse-response sample above 0.1 % of the peak, in SOS and in transfer-function form alike."""
    assert butter_ringing_samples(125.0, anyppg.BAND_HZ, 3) == 427
    b, a = signal.butter(3, anyppg.BAND_HZ, btype="bandpass", output="ba", fs=125.0)
    impulse = np.zeros(5000)
    impulse[0] = 1.0
    response = np.abs(signal.lfilter(b, a, impulse))
    assert np.flatnonzero(response > 1e-3 * response.max())[-1] == 427


@pytest.mark.parametrize("n", [1250, 1000, 262])
def test_scipy_with_mne_padding_equals_the_hand_written_reference(n: int) -> None:
    """SciPy's SOS filter given the ringing pad equals the hand-written transfer-function reference to ~1e-7
    of the signal's scale (10 s, 8 s and a PPG-BP window shorter than the pad, which is cut to n - 1)."""
    x = pulse(n, 125.0)
    sos = signal.butter(3, anyppg.BAND_HZ, btype="bandpass", output="sos", fs=125.0)
    ours = signal.sosfiltfilt(sos, x, padlen=min(butter_ringing_samples(125.0, anyppg.BAND_HZ, 3), n - 1))
    reference = mne_style_reference(x, 125.0, 427)
    scale = np.ptp(reference)
    assert np.max(np.abs(ours - reference)) < 1e-7 * scale
    # the module's float32 path is the same filter
    module = butter_bandpass_sos(x[None], 125.0, anyppg.BAND_HZ, 3, ringing_pad=True).double().numpy()[0]
    assert np.max(np.abs(module - reference)) < 1e-6 * scale
    # SciPy's default padding (the published protocol) is another filter at the edges
    default = butter_bandpass_sos(x[None], 125.0, anyppg.BAND_HZ, 3).double().numpy()[0]
    assert np.max(np.abs(default - reference)) > 0.01 * scale


def test_anyppg_switch_changes_only_the_padding() -> None:
    x = torch.from_numpy(np.stack([pulse(1250, 125.0, s) for s in range(2)]))
    published = AnyPPGEncoder(random_init=True).preprocess(x)
    native = AnyPPGEncoder(random_init=True, native_filter_padding=True).preprocess(x)
    sos = signal.butter(3, anyppg.BAND_HZ, btype="bandpass", output="sos", fs=125.0)
    expected = [signal.sosfiltfilt(sos, row, padlen=427) for row in x.numpy()]
    expected = np.stack([(e - e.mean()) / (e.std() + 1e-6) for e in expected])
    assert np.allclose(native[:, 0].double().numpy(), expected, atol=1e-5)
    assert not torch.allclose(published, native, atol=1e-2)
    middle = slice(450, 800)  # far from both edges the two paddings agree up to the z-score's scale
    assert torch.corrcoef(torch.stack([published[0, 0, middle], native[0, 0, middle]]))[0, 1] > 0.999


def test_sigmappg_unit_scale() -> None:
    x = torch.from_numpy(np.stack([pulse(500, 50.0), np.full(500, 3.0)]))
    symmetric = SigmaPPGEncoder(depth=1, random_init=True).preprocess(x)
    unit = SigmaPPGEncoder(depth=1, random_init=True, scale="unit").preprocess(x)
    assert unit[0].min().item() == 0.0 and unit[0].max().item() == 1.0
    assert torch.allclose(unit[0], (symmetric[0] + 1) / 2, atol=1e-6)
    assert torch.equal(unit[1], torch.zeros(1, 500))  # a flat window is zeros either way
    # the published default is the [-1, 1] formula it always was, bit for bit
    filtered = butter_bandpass_sos(x, 50.0, sigmappg.BAND_HZ, order=2).double().numpy()[0]
    by_hand = 2.0 * (filtered - filtered.min()) / (filtered.max() - filtered.min()) - 1.0
    assert torch.equal(minmax_window(filtered), torch.from_numpy(by_hand.astype(np.float32)))


def test_sigmappg_filter_before_crop_on_ppgbp_windows() -> None:
    """A 105-sample window: published = crop to 100, then filter and scale; switched = filter and scale the
    105 samples, then crop. Windows of whole patches are the same either way."""
    short = torch.from_numpy(pulse(105, 50.0)[None])
    published = SigmaPPGEncoder(depth=1, random_init=True).preprocess(short)
    authors = SigmaPPGEncoder(depth=1, random_init=True, filter_before_crop=True).preprocess(short)
    whole = minmax_window(butter_bandpass_sos(short, 50.0, sigmappg.BAND_HZ, order=2))
    assert authors.shape == published.shape == (1, 1, 100)
    assert torch.equal(authors[:, 0], whole[:, :100])
    assert not torch.allclose(authors, published, atol=1e-3)
    full = torch.from_numpy(pulse(500, 50.0)[None])
    switched = SigmaPPGEncoder(depth=1, random_init=True, filter_before_crop=True)
    assert torch.equal(switched.preprocess(full), SigmaPPGEncoder(depth=1, random_init=True).preprocess(full))


@pytest.mark.parametrize(("build", "message"), [
    (lambda: AnyPPGEncoder(random_init=True, native_filter_padding="false"), "native_filter_padding must be"),
    (lambda: SigmaPPGEncoder(depth=1, random_init=True, scale="zero_one"), "scale must be one of"),
    (lambda: SigmaPPGEncoder(depth=1, random_init=True, filter_before_crop=1), "filter_before_crop must be"),
])
def test_bad_switch_values_are_refused(build, message) -> None:
    with pytest.raises(ConfigError, match=message):
        build()


def test_switches_are_deviations_and_change_the_identity(tmp_path) -> None:
    """Default encoders list no deviation and keep the settings digest they had before the switches existed
    (a published run folder still resumes); a switched-on one is named and is another embedding-cache key."""
    default, native = AnyPPGEncoder(random_init=True), AnyPPGEncoder(random_init=True, native_filter_padding=True)
    assert default.deviations() == [] and native.deviations() == ["anyppg.native_filter_padding=True"]
    sigma = SigmaPPGEncoder(depth=1, random_init=True, scale="unit", filter_before_crop=True)
    assert sigma.deviations() == ["sigmappg.scale=unit", "sigmappg.filter_before_crop=True"]
    assert SigmaPPGEncoder(depth=1, random_init=True).deviations() == []
    assert encoder_identity(default)["settings"] != encoder_identity(native)["settings"]
    cache = EmbeddingCache(tmp_path / "cache")
    assert cache.key(default, tmp_path, 125.0) != cache.key(native, tmp_path, 125.0)
    del default.native_filter_padding  # as the encoder was before the switch existed
    assert encoder_identity(default) == encoder_identity(AnyPPGEncoder(random_init=True))


def test_a_switched_on_encoder_is_a_deviation_in_its_records_and_summary(tmp_path, engine_root) -> None:
    """End to end: AnyPPG with ``native_filter_padding: true`` has it in every record's ``deviations`` and
    in its summary.csv row (whence tables, captions and W&B take it); the default run has none."""
    import json

    import pandas as pd

    from tests.benchmark.helpers import LINEAR, run, suite_config, write_config

    rows = {}
    for label, extra in (("default", {}), ("native", {"native_filter_padding": True})):
        encoder = {"class_path": "ppgbench_pl.encoders.anyppg.AnyPPGEncoder",
                   "init_args": {"random_init": True, **extra}}
        out = tmp_path / label
        config = suite_config(engine_root, out, encoders=[encoder], regimes=[LINEAR], tasks=["synthetic-hr"],
                              folds=[0], data={"synthetic_windows": 4})
        assert run(["--config", str(write_config(tmp_path / f"{label}.yaml", config))], "fit") == 0
        records = [json.loads(p.read_text()) for p in out.glob("jobs/*/results.json")]
        assert records and all(r["status"] == "ok" for r in records)
        summary = pd.read_csv(out / "summary.csv", keep_default_na=False)
        rows[label] = ([r["deviations"] for r in records],
                       summary.set_index("model").loc["anyppg (random init)", "deviations"])
    assert rows["default"] == ([[]], "")
    assert rows["native"] == ([["anyppg.native_filter_padding=True"]], "anyppg.native_filter_padding=True")


def test_moment_pad_to_context_is_a_deviation_without_changing_the_default_digest() -> None:
    from ppgbench_pl.encoders.moment import MomentSmallEncoder

    model = MomentSmallEncoder(random_init=True)
    default_identity = encoder_identity(model)
    assert model.deviations() == []
    model.pad_to_context = True
    assert model.deviations() == ["moment_small.pad_to_context=True"]
    assert encoder_identity(model)["settings"] != default_identity["settings"]
    model.pad_to_context = False
    assert "pad_to_context" in vars(model) and encoder_identity(model) == default_identity
