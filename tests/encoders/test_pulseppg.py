"""PulsePPG: exact checkpoint layout, forward on every benchmark length, the `net` checkpoint format."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from ppgbench_pl.encoders.preprocessing import cheby2_bandpass_ba
from ppgbench_pl.encoders.pulseppg import PulsePPGEncoder
from ppgbench_pl.errors import CheckpointError
from tests.encoders.manifest_tools import assert_matches_manifest, load_manifest, parameter_count
from tests.encoders.test_papagei import randomize

LENGTHS_50HZ = [400, 500, 300, 105]  # DaLiA/WildPPG, 10 s sets, RealWorldPPG, PPG-BP


@pytest.fixture(scope="module")
def source() -> PulsePPGEncoder:
    """One random-weights model shared by the tests (28.5M parameters: build it once)."""
    model = PulsePPGEncoder(random_init=True).eval()
    randomize(model, seed=11)
    return model


def _stats(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((batch,), 100.0), torch.full((batch,), 40.0)


def _write_checkpoint(model: PulsePPGEncoder, path: Path, test_loss: object = 0.25) -> None:
    """The authors' layout: weights under `net`, an optimizer state dict, loss and epoch."""
    # Optimizer over copies of two tensors: the real format, a small file, the model left untouched.
    params = [p.detach().clone().requires_grad_() for p in model.first_block_conv.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-3)
    for param in params:
        param.grad = torch.zeros_like(param)
    optimizer.step()
    torch.save({"net": model.state_dict(), "optimizer": optimizer.state_dict(), "test_loss": test_loss,
                "epoch": 42}, path)


def test_state_dict_and_parameter_count_match_manifest(source: PulsePPGEncoder) -> None:
    manifest = load_manifest("pulseppg")
    assert_matches_manifest(source, manifest)
    assert list(source.state_dict()) == list(manifest["state_dict"])
    assert parameter_count(source) == manifest["parameter_count"]["total_parameters"]
    assert sum(b.numel() for b in source.buffers()) == manifest["parameter_count"]["buffer_elements"]
    cls = PulsePPGEncoder
    assert (cls.name, cls.sampling_rate, cls.embed_dim) == ("pulseppg", 50.0, 512)
    assert PulsePPGEncoder.uses_group_stats


def test_forward_on_every_benchmark_length(source: PulsePPGEncoder) -> None:
    with torch.no_grad():
        for length in LENGTHS_50HZ:
            out = source(torch.randn(2, length) * 40 + 100, *_stats(2))
            assert out.shape == (2, 512) and torch.isfinite(out).all(), length


def test_preprocess_normalises_with_group_stats_then_filters(source: PulsePPGEncoder) -> None:
    x = torch.randn(2, 500) * 40 + 100
    mean, std = _stats(2)
    net_in = source.preprocess(x, mean, std)
    expected = cheby2_bandpass_ba((x - 100.0) / (40.0 + 1e-6), 50.0)
    assert net_in.shape == (2, 1, 500)
    torch.testing.assert_close(net_in[:, 0], expected)
    with pytest.raises(ValueError, match="ppg_mean"):
        source.preprocess(x)


def test_instance_norm_makes_the_embedding_scale_invariant(source: PulsePPGEncoder) -> None:
    x = torch.randn(1, 1, 300)
    with torch.no_grad():
        torch.testing.assert_close(source.forward_features(x), source.forward_features(3.0 * x + 5.0),
                                   atol=1e-4, rtol=1e-4)


def test_checkpoint_in_authors_format_loads_strictly_and_reproduces(source: PulsePPGEncoder,
                                                                     tmp_path: Path) -> None:
    path = tmp_path / "checkpoint_best.pkl"
    _write_checkpoint(source, path)
    loaded = PulsePPGEncoder(checkpoint=path).eval()
    x, stats = torch.randn(2, 400) * 40 + 100, _stats(2)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, *stats), source(x, *stats))


def test_numpy_loss_loads_through_the_allow_list(source: PulsePPGEncoder, tmp_path: Path) -> None:
    path = tmp_path / "checkpoint_best.pkl"
    _write_checkpoint(source, path, test_loss=np.float64(0.25))
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, map_location="cpu", weights_only=True)
    loaded = PulsePPGEncoder(random_init=True)
    loaded.load_pretrained(path)
    torch.testing.assert_close(loaded.first_block_bn.running_var, source.first_block_bn.running_var)


@pytest.mark.parametrize("how", ["missing", "unexpected", "wrong_shape"])
def test_damaged_checkpoint_raises_with_key_names(how: str, tmp_path: Path) -> None:
    small = PulsePPGEncoder(base_filters=8, n_block=2, random_init=True)  # same loading path, cheap to build
    state = dict(small.state_dict())
    if how == "missing":
        key = "basicblock_list.1.conv2.conv.bias"
        del state[key]
    elif how == "unexpected":
        key = "final_bn.weight"
        state[key] = torch.ones(8)
    else:
        key = "first_block_conv.conv.weight"
        state[key] = torch.zeros(8, 1, 3)
    path = tmp_path / "bad.pkl"
    torch.save({"net": state, "epoch": 1}, path)
    with pytest.raises(CheckpointError, match=key.replace(".", r"\.")):
        small.load_pretrained(path)


def test_checkpoint_without_net_is_rejected(source: PulsePPGEncoder, tmp_path: Path) -> None:
    path = tmp_path / "bare.pkl"
    torch.save({"model": {}}, path)
    with pytest.raises(CheckpointError, match="'net'"):
        source.load_pretrained(path)
