"""AnyPPG: keys and shapes match the authors' checkpoint, forward works at every benchmark length,
checkpoints load strictly and reproduce outputs, damaged checkpoints fail with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ppgbench_pl.encoders.anyppg import AnyPPGEncoder
from ppgbench_pl.errors import CheckpointError
from tests.encoders.manifest_tools import assert_matches_manifest, load_manifest, parameter_count

LENGTHS_125HZ = (1000, 1250, 750, 263)


@pytest.fixture(scope="module")
def encoder() -> AnyPPGEncoder:
    torch.manual_seed(0)
    model = AnyPPGEncoder(random_init=True)
    _randomise_buffers(model)
    return model.eval()


def _randomise_buffers(model: torch.nn.Module) -> None:
    """Give BatchNorm non-trivial running statistics so a lost buffer would change outputs."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)


def test_class_attributes() -> None:
    enc = AnyPPGEncoder
    assert (enc.name, enc.sampling_rate, enc.embed_dim) == ("anyppg", 125.0, 512)


def test_state_dict_matches_manifest(encoder: AnyPPGEncoder) -> None:
    manifest = load_manifest("anyppg")
    assert_matches_manifest(encoder, manifest)
    assert list(encoder.state_dict()) == list(manifest["state_dict"])  # same order as upstream too
    assert parameter_count(encoder) == manifest["parameter_count"]["total_parameters"]


def test_grouped_convs_have_16_channels_per_group(encoder: AnyPPGEncoder) -> None:
    groups = [stage.block_list[0].conv2.conv.groups for stage in encoder.stage_list]
    assert groups == [4, 10, 10, 25, 25, 32]


@pytest.mark.parametrize("length", LENGTHS_125HZ)
def test_forward_every_benchmark_length(encoder: AnyPPGEncoder, length: int) -> None:
    x = torch.randn(2, length)
    with torch.no_grad():
        out = encoder(x)
    assert out.shape == (2, 512)
    assert torch.isfinite(out).all()


def test_downsampling_is_128(encoder: AnyPPGEncoder) -> None:
    seen: list[int] = []
    hook = encoder.stage_list[-1].register_forward_hook(lambda m, i, o: seen.append(o.shape[-1]))
    with torch.no_grad():
        encoder.forward_features(torch.randn(1, 1, 1250))
    hook.remove()
    assert seen == [10]


def test_preprocess_is_filtered_zscore(encoder: AnyPPGEncoder) -> None:
    t = torch.arange(1250) / 125.0
    x = torch.stack([torch.sin(2 * torch.pi * 1.2 * t) * 50 + 300, torch.randn(1250)])
    out = encoder.preprocess(x)
    assert out.shape == (2, 1, 1250) and out.dtype == torch.float32
    assert torch.allclose(out.mean(-1), torch.zeros(2, 1), atol=1e-4)
    assert torch.allclose(out.std(-1, unbiased=False), torch.ones(2, 1), atol=1e-4)
    # The 300-unit DC offset is removed by the band-pass, the 1.2 Hz tone survives.
    assert torch.corrcoef(torch.stack([out[0, 0], torch.sin(2 * torch.pi * 1.2 * t)]))[0, 1] > 0.99


def test_checkpoint_round_trip(encoder: AnyPPGEncoder, tmp_path: Path) -> None:
    path = tmp_path / "anyppg_ckpt.pth"
    torch.save(encoder.state_dict(), path)  # the authors' format: bare state dict, no prefix
    x = torch.randn(2, 1000)
    torch.manual_seed(1)
    fresh = AnyPPGEncoder(checkpoint=str(path)).eval()
    with torch.no_grad():
        assert torch.equal(fresh(x), encoder(x))
    assert fresh.checkpoint_path == str(path)
    assert fresh.checkpoint_digest() != "random-init"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("missing", "missing keys [stage_list.3.block_list.1.se_fc2.weight]"),
        ("extra", "unexpected keys [dense.weight]"),
        ("shape", "wrong shapes [first_conv.conv.weight]"),
    ],
)
def test_damaged_checkpoint_is_refused(
    encoder: AnyPPGEncoder, tmp_path: Path, damage: str, expected: str
) -> None:
    state = dict(encoder.state_dict())
    if damage == "missing":
        del state["stage_list.3.block_list.1.se_fc2.weight"]
    elif damage == "extra":
        state["dense.weight"] = torch.zeros(1, 512)
    else:
        state["first_conv.conv.weight"] = torch.zeros(64, 1, 5)
    path = tmp_path / "bad.pth"
    torch.save(state, path)
    with pytest.raises(CheckpointError) as info:
        AnyPPGEncoder(random_init=True).load_pretrained(path)
    assert expected in str(info.value)
