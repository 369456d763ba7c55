import re

import numpy as np
import pytest
import torch

from ppgbench_pl.encoders.prv import NEUROKIT_FEATURES, PUBLISHED_FEATURES, PRVEncoder, PublishedPRVEncoder


def pulse_train(hr_bpm: float, seconds: float = 10.0, fs: float = 100.0, seed: int = 0) -> np.ndarray:
    """Narrow Gaussian pulses at a fixed rate plus a little noise."""
    t = np.arange(int(seconds * fs)) / fs
    beats = np.arange(0.3, seconds, 60.0 / hr_bpm)
    x = sum(np.exp(-0.5 * ((t - b) / 0.05) ** 2) for b in beats)
    return x + np.random.default_rng(seed).normal(0, 0.01, len(t))


@pytest.mark.parametrize("encoder_cls", [PRVEncoder, PublishedPRVEncoder])
@pytest.mark.parametrize("hr", [55.0, 72.0, 110.0])
def test_prv_recovers_known_heart_rate(encoder_cls, hr):
    enc = encoder_cls(n_jobs=1)
    features = enc(torch.tensor(np.stack([pulse_train(hr)]), dtype=torch.float32))
    names = enc.feature_names
    assert features.shape == (1, enc.embed_dim)
    assert features[0, names.index("hr_bpm")].item() == pytest.approx(hr, rel=0.02)
    assert features[0, names.index("mean_nn")].item() == pytest.approx(60000 / hr, rel=0.02)


def test_published_prv_lf_hf_are_zero_on_short_windows_and_degenerate_windows_are_zero():
    enc = PublishedPRVEncoder(n_jobs=1)
    x = torch.tensor(np.stack([pulse_train(70), np.zeros(1000), np.full(1000, np.nan)]), dtype=torch.float32)
    f = enc(x).numpy()
    assert f[0, PUBLISHED_FEATURES.index("hr_bpm")] > 0
    assert (f[0, [PUBLISHED_FEATURES.index(n) for n in ("lf", "hf", "lf_hf")]] == 0).all()
    assert (f[1:] == 0).all()
    too_short = enc(torch.tensor(pulse_train(70)[None, :50], dtype=torch.float32)).numpy()
    assert (too_short == 0).all()


def test_neurokit_prv_reports_beats_and_never_nan():
    enc = PRVEncoder(n_jobs=1)
    x = torch.tensor(np.stack([pulse_train(60, seconds=2.1), np.zeros(210)]), dtype=torch.float32)
    f = enc(x).numpy()
    assert np.isfinite(f).all()
    assert f[1].sum() == 0 and f[0, NEUROKIT_FEATURES.index("n_beats")] >= 1


def test_parallel_extraction_matches_serial():
    x = torch.tensor(np.stack([pulse_train(60 + i, seed=i) for i in range(40)]), dtype=torch.float32)
    np.testing.assert_allclose(PublishedPRVEncoder(n_jobs=2)(x).numpy(), PublishedPRVEncoder(n_jobs=1)(x).numpy())


def test_prv_controls_cannot_be_finetuned():
    from ppgbench_pl.tasks.encoder_task import EncoderTask

    with pytest.raises(ValueError, match="no trainable parameters"):
        EncoderTask(PRVEncoder(), mode="finetune")


@pytest.fixture
def fresh_check():
    from ppgbench_pl.encoders.prv import check_neurokit

    check_neurokit.cache_clear()
    yield
    check_neurokit.cache_clear()


@pytest.mark.parametrize("broken, message", [
    ("ppg_findpeaks", "fails on a clean 72-bpm synthetic pulse (KeyError"),
    ("hrv_time", "fails on a clean 72-bpm synthetic pulse (KeyError"),
    ("wrong_peaks", "measures a clean 72-bpm synthetic pulse as mean NN"),
])
def test_a_neurokit2_that_fails_everywhere_is_refused_in_one_line_not_zero_filled(fresh_check, monkeypatch,
                                                                                  broken, message):
    """Each window's NeuroKit2 errors become zero features (degenerate windows), so a NeuroKit2 that breaks
    on every window gave an all-zero control that was scored as if it had measured something."""
    import neurokit2 as nk

    from ppgbench_pl.errors import PPGBenchError

    if broken == "wrong_peaks":
        monkeypatch.setattr(nk, "ppg_findpeaks", lambda signal, sampling_rate: {"PPG_Peaks": [0, 50, 100, 150]})
    else:
        def fail(*args, **kwargs):
            raise KeyError("PPG_Peaks")
        monkeypatch.setattr(nk, broken, fail)
    x = torch.tensor(np.stack([pulse_train(70)]), dtype=torch.float32)
    with pytest.raises(PPGBenchError, match=re.escape(message)) as info:
        PRVEncoder(n_jobs=1)(x)
    assert "\n" not in str(info.value) and "prv_published" in str(info.value)


def test_a_working_neurokit2_passes_the_check_and_degenerate_windows_still_give_zeros(fresh_check):
    from ppgbench_pl.encoders.prv import check_neurokit

    check_neurokit()  # the installed NeuroKit2 measures the clean pulse
    f = PRVEncoder(n_jobs=1)(torch.tensor(np.stack([pulse_train(70), np.zeros(1000)]), dtype=torch.float32)).numpy()
    assert f[0, NEUROKIT_FEATURES.index("hr_bpm")] == pytest.approx(70, rel=0.02) and (f[1] == 0).all()
