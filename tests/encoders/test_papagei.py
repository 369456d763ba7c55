"""PaPaGei-P/-S: exact checkpoint layout, forward on every benchmark length, strict loading, SAME padding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from ppgbench_pl.encoders.base import load_state_dict_strict
from ppgbench_pl.encoders.layers import PreActBlock1d, SameConv1d, SamePadMaxPool1d, pad_channels
from ppgbench_pl.encoders.papagei import PaPaGeiPEncoder, PaPaGeiSEncoder
from ppgbench_pl.errors import CheckpointError
from tests.encoders.manifest_tools import assert_matches_manifest, load_manifest, parameter_count

ENCODERS = [PaPaGeiPEncoder, PaPaGeiSEncoder]
LENGTHS_125HZ = [1000, 1250, 750, 263]  # DaLiA/WildPPG, 10 s sets, RealWorldPPG, PPG-BP


def randomize(module: nn.Module, seed: int) -> None:
    """Random weights and BN statistics, so a load that misses anything changes the output."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, value in module.state_dict().items():
            if value.is_floating_point():
                noise = torch.rand(value.shape, generator=gen) + 0.5 if "running_var" in key else (
                    0.1 * torch.randn(value.shape, generator=gen))
                value.copy_(noise)


@pytest.mark.parametrize("cls", ENCODERS)
def test_state_dict_and_parameter_count_match_manifest(cls: type[PaPaGeiPEncoder]) -> None:
    model, manifest = cls(random_init=True), load_manifest(cls.name)
    assert_matches_manifest(model, manifest)
    assert list(model.state_dict()) == list(manifest["state_dict"])
    assert parameter_count(model) == manifest["parameter_count"]["total_parameters"]
    assert sum(b.numel() for b in model.buffers()) == manifest["parameter_count"]["buffer_elements"]
    assert (cls.name, cls.sampling_rate, cls.embed_dim, cls.uses_group_stats) == (
        manifest["model"], 125.0, 512, False)


@pytest.mark.parametrize("cls", ENCODERS)
def test_forward_on_every_benchmark_length(cls: type[PaPaGeiPEncoder]) -> None:
    model = cls(random_init=True).eval()
    with torch.no_grad():
        for length in LENGTHS_125HZ:
            out = model(torch.randn(2, length) * 40 + 100)
            assert out.shape == (2, 512) and torch.isfinite(out).all(), length


def test_preprocess_gives_one_channel_zscored_input() -> None:
    x = torch.randn(2, 1250) * 40 + 100
    net_in = PaPaGeiPEncoder(random_init=True).preprocess(x)
    assert net_in.shape == (2, 1, 1250) and net_in.dtype == torch.float32
    torch.testing.assert_close(net_in.mean(-1), torch.zeros(2, 1), atol=1e-4, rtol=0)


def test_trunk_downsamples_nine_times() -> None:
    model = PaPaGeiPEncoder(random_init=True).eval()
    out = model.first_block_conv(torch.zeros(1, 1, 1250))
    for block in model.basicblock_list:
        out = block(out)
    assert out.shape == (1, 512, 3)  # ceil(1250 / 2**9)


@pytest.mark.parametrize("cls", ENCODERS)
def test_checkpoint_with_module_prefix_loads_strictly_and_reproduces(cls: type[PaPaGeiPEncoder],
                                                                      tmp_path: Path) -> None:
    source = cls(random_init=True).eval()
    randomize(source, seed=7)
    path = tmp_path / f"{cls.name}.pt"
    torch.save({f"module.{k}": v for k, v in source.state_dict().items()}, path)
    x = torch.randn(2, 1000)
    loaded = cls(checkpoint=path).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), source(x))
    assert loaded.checkpoint_path == str(path) and loaded.checkpoint_digest() != "random-init"
    plain = tmp_path / "plain.pt"
    torch.save(source.state_dict(), plain)
    again = cls(random_init=True).eval()
    again.load_pretrained(plain)
    with torch.no_grad():
        torch.testing.assert_close(again(x), source(x))


def _damaged(state: dict[str, Tensor], how: str) -> tuple[dict[str, Tensor], str]:
    state = dict(state)
    if how == "missing":
        del state["basicblock_list.3.conv2.conv.weight"]
        return state, "basicblock_list.3.conv2.conv.weight"
    if how == "unexpected":
        state["head.weight"] = torch.zeros(3)
        return state, "head.weight"
    state["dense.weight"] = torch.zeros(512, 256)
    return state, "dense.weight"


@pytest.mark.parametrize("how", ["missing", "unexpected", "wrong_shape"])
def test_damaged_checkpoint_raises_with_key_names(how: str, tmp_path: Path) -> None:
    model = PaPaGeiSEncoder(random_init=True)
    state, key = _damaged(model.state_dict(), how)
    path = tmp_path / "bad.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointError, match=key.replace(".", r"\.")):
        PaPaGeiSEncoder(random_init=True).load_pretrained(path)


def test_p_checkpoint_does_not_fit_s() -> None:
    with pytest.raises(CheckpointError, match=r"missing keys \[expert_layers_1"):
        p_state = PaPaGeiPEncoder(random_init=True).state_dict()
        load_state_dict_strict(PaPaGeiSEncoder(random_init=True), p_state, source="p")


def test_non_state_dict_checkpoint_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "list.pt"
    torch.save([torch.zeros(1)], path)
    with pytest.raises(CheckpointError, match="not a state dict"):
        PaPaGeiPEncoder(random_init=True).load_pretrained(path)


# -- SAME padding parity (layers.py), checked against an explicit NumPy computation -------------------
def _numpy_same_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """Cross-correlation with TF SAME padding: pad floor(p/2) left, the rest right."""
    length, k = x.shape[-1], w.shape[-1]
    out_len = int(np.ceil(length / stride))
    p = max(0, (out_len - 1) * stride + k - length)
    xp = np.pad(x, ((0, 0), (p // 2, p - p // 2)))
    return np.stack([
        np.stack([(w[o] * xp[:, j * stride:j * stride + k]).sum() + b[o] for j in range(out_len)])
        for o in range(w.shape[0])
    ])


@pytest.mark.parametrize(("length", "kernel", "stride"),
                         [(7, 3, 1), (8, 4, 1), (5, 3, 2), (6, 3, 2), (9, 11, 2)])
def test_same_conv_matches_explicit_padding(length: int, kernel: int, stride: int) -> None:
    conv = SameConv1d(2, 3, kernel, stride=stride)
    x = torch.randn(1, 2, length)
    with torch.no_grad():
        got = conv(x)[0].numpy()
    weight, bias = conv.conv.weight.detach().numpy(), conv.conv.bias.detach().numpy()
    want = _numpy_same_conv(x[0].numpy(), weight, bias, stride)
    assert got.shape == (3, -(-length // stride))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shortcut_pool_pads_zero_on_the_right() -> None:
    x = -torch.arange(1.0, 6.0).view(1, 1, 5)  # [-1..-5]: the padded zero wins the last window
    torch.testing.assert_close(SamePadMaxPool1d(2)(x), torch.tensor([[[-1.0, -3.0, 0.0]]]))
    torch.testing.assert_close(SamePadMaxPool1d(1)(x), x)


def test_pad_channels_splits_floor_front() -> None:
    out = pad_channels(torch.ones(1, 3, 2), 6)
    assert out[0, :, 0].tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert pad_channels(out, 6) is out


def test_first_block_skips_preactivation_but_owns_bn1() -> None:
    x = torch.randn(2, 4, 9)
    for first, should_change in ((True, False), (False, True)):
        block = PreActBlock1d(4, 8, 3, downsample=True, is_first_block=first).eval()
        with torch.no_grad():
            before = block(x)
            block.bn1.bias.fill_(3.0)
            changed = not torch.allclose(block(x), before)
        assert before.shape == (2, 8, 5) and changed == should_change
