import numpy as np
import pytest
import torch

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.label_efficiency import LabelEfficiencyRegime, regime_name, sample_groups

FRACTIONS = (0.01, 0.1, 1.0)
NAMES = ["linear_frac1", "linear_frac10", "linear_frac100"]


def test_names_one_per_fraction():
    assert [LabelEfficiencyRegime(f).name for f in FRACTIONS] == NAMES
    assert regime_name(0.005) == "linear_frac0.5" and regime_name(0.29) == "linear_frac29"
    assert "name" not in LabelEfficiencyRegime(0.1).settings()
    assert len({LabelEfficiencyRegime(f).state_key for f in FRACTIONS}) == 3


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_fraction_outside_unit_interval_is_rejected(fraction):
    with pytest.raises(ConfigError, match="fraction"):
        LabelEfficiencyRegime(fraction)


def test_sample_sizes_respect_fraction_and_minimum():
    groups = [f"S{i:03d}" for i in range(200)]
    sizes = {f: len(sample_groups(groups, f, 4, seed=42)) for f in (0.001, 0.01, 0.1, 0.5, 1.0)}
    assert sizes == {0.001: 4, 0.01: 4, 0.1: 20, 0.5: 100, 1.0: 200}
    assert len(sample_groups(groups[:10], 0.1, 4, seed=42)) == 4
    with pytest.raises(ConfigError, match="at least 4"):
        sample_groups(groups[:3], 1.0, 4, seed=42)


def test_sampling_is_seeded_and_keeps_order():
    groups = [f"S{i:03d}" for i in range(100)]
    first = sample_groups(groups, 0.1, 4, seed=42)
    assert first == sample_groups(groups, 0.1, 4, seed=42)
    assert first != sample_groups(groups, 0.1, 4, seed=43)
    assert first != sample_groups(groups, 0.11, 4, seed=42)[:10]
    assert first == sorted(first, key=groups.index) and len(set(first)) == 10


@pytest.fixture(scope="module")
def datamodule(tmp_path_factory):
    return PPGDataModule(dataset="synthetic", root=str(tmp_path_factory.mktemp("le") / "data"),
                         tasks=["synthetic-hr"], seeds=[42], folds=[0], synthetic_subjects=20,
                         synthetic_windows=4)


@pytest.fixture(scope="module")
def embeddings(datamodule):
    encoder = PublishedPRVEncoder(n_jobs=1)
    with torch.no_grad():
        return encoder(torch.from_numpy(datamodule.windows(float(encoder.sampling_rate)).x)).numpy()


def _context(dm, tmp_path, embeddings=None, seed=42):
    encoder = PublishedPRVEncoder(n_jobs=1)
    return JobContext.build(dm, encoder, get_task("synthetic-hr"), seed, 0, tmp_path, embeddings=embeddings,
                            raw_windows=False)


def test_train_positions_subsample_whole_subjects(datamodule, tmp_path):
    ctx = _context(datamodule, tmp_path)
    view = ctx.view
    outer_train, _ = ctx.outer()
    small, chosen, n_outer = LabelEfficiencyRegime(0.01).train_positions(ctx)
    full, everyone, _ = LabelEfficiencyRegime(1.0).train_positions(ctx)
    assert n_outer == 16 and len(chosen) == ctx.n_inner_folds == 4 and len(everyone) == 16
    np.testing.assert_array_equal(full, outer_train)
    assert set(small) <= set(outer_train.tolist())
    assert set(view.groups[small]) == set(chosen)  # every window of a chosen subject, no other
    assert len(small) == int(np.isin(view.groups, chosen).sum())
    again, _, _ = LabelEfficiencyRegime(0.01).train_positions(ctx)
    np.testing.assert_array_equal(small, again)
    assert len(LabelEfficiencyRegime(0.01, min_groups=6).train_positions(ctx)[1]) == 6


def test_three_fractions_give_one_outcome_each(datamodule, embeddings, tmp_path):
    ctx = _context(datamodule, tmp_path, embeddings)
    used = {}
    for fraction, name in zip(FRACTIONS, NAMES, strict=True):
        regime = LabelEfficiencyRegime(fraction)
        assert regime.name == name
        (outcome,) = regime.run(ctx)
        details = outcome.details
        used[name] = details["n_train_subjects"]
        assert details["n_outer_train_subjects"] == 16 and len(details["train_subjects"]) == used[name]
        assert np.isfinite(outcome.metrics["mae"]) and "alpha" in outcome.params
    assert used == {"linear_frac1": 4, "linear_frac10": 4, "linear_frac100": 16}
