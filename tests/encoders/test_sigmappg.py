"""SigmaPPG: keys (both alias families) and shapes match the authors' checkpoint, forward works at every
benchmark length (cropped to whole patches), the positional quirk is reproduced, and ``sigma.pth``-style
checkpoints load strictly, reproduce outputs and fail clearly when damaged."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from ppgbench_pl.encoders.sigmappg import SigmaPPGEncoder
from ppgbench_pl.errors import CheckpointError
from tests.encoders.manifest_tools import assert_matches_manifest, load_manifest, parameter_count

LENGTHS_50HZ = (400, 500, 300, 105)
ALIASES = {"patch_embed_seq.0.": "patch_embed_conv.", "patch_embed_seq.1.": "patch_embed_projection."}


@pytest.fixture(scope="module")
def encoder() -> SigmaPPGEncoder:
    torch.manual_seed(0)
    return SigmaPPGEncoder(random_init=True).eval()


@pytest.fixture(scope="module")
def small() -> SigmaPPGEncoder:
    """Two blocks instead of 18: same checkpoint layout, much smaller files for the damage tests."""
    torch.manual_seed(0)
    return SigmaPPGEncoder(depth=2, random_init=True).eval()


def sigma_checkpoint(model: SigmaPPGEncoder, **extra: object) -> dict[str, object]:
    """The on-disk layout of ``sigma.pth``: the MEM wrapper's state under ``model`` plus training state."""
    dim = model.embed_dim
    state: dict[str, object] = {"student." + k: v for k, v in model.state_dict().items()}
    state["lm_head.weight"] = torch.randn(4096, dim)
    state["lm_head.bias"] = torch.randn(4096)
    state["projection_head.0.weight"] = torch.randn(dim, dim)
    state["projection_head.0.bias"] = torch.randn(dim)
    return {"model": state, "epoch": 3, **extra}


def test_class_attributes() -> None:
    enc = SigmaPPGEncoder
    assert (enc.name, enc.sampling_rate, enc.embed_dim, enc.min_samples) == ("sigmappg", 50.0, 360, 100)


def test_state_dict_matches_manifest(encoder: SigmaPPGEncoder) -> None:
    manifest = load_manifest("sigmappg")
    assert_matches_manifest(encoder, manifest)
    assert list(encoder.state_dict()) == list(manifest["state_dict"])
    assert parameter_count(encoder) == manifest["parameter_count"]["total_parameters"]
    lm_head = sum(p.numel() for p in encoder.lm_head.parameters())
    assert lm_head == manifest["parameter_count"]["of_which_lm_head_unused_for_embedding"]


def test_alias_key_families_share_storage(encoder: SigmaPPGEncoder) -> None:
    state = encoder.state_dict()
    aliased = [k for k in state if k.startswith(tuple(ALIASES))]
    assert len(aliased) == 14
    for key in aliased:
        prefix = next(p for p in ALIASES if key.startswith(p))
        twin = ALIASES[prefix] + key[len(prefix):]
        assert state[key].data_ptr() == state[twin].data_ptr(), key


@pytest.mark.parametrize("length", LENGTHS_50HZ)
def test_forward_every_benchmark_length(encoder: SigmaPPGEncoder, length: int) -> None:
    x = torch.randn(2, length)
    assert encoder.preprocess(x).shape == (2, 1, length - length % 100)
    with torch.no_grad():
        out = encoder(x)
    assert out.shape == (2, 360)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("length", [0, 1, 99])
def test_short_windows_are_refused(encoder: SigmaPPGEncoder, length: int) -> None:
    with pytest.raises(ValueError, match="at least 100 samples"):
        encoder(torch.randn(2, length))


def test_too_long_windows_are_refused(encoder: SigmaPPGEncoder) -> None:
    with pytest.raises(ValueError, match="at most 12000"):
        encoder.preprocess(torch.randn(1, 12100))


def test_preprocess_minmax_and_flat(encoder: SigmaPPGEncoder) -> None:
    t = torch.arange(523) / 50.0
    x = torch.stack([torch.sin(2 * torch.pi * 1.5 * t) * 40 + 500, torch.full((523,), 7.0)])
    out = encoder.preprocess(x)
    assert out.shape == (2, 1, 500) and out.dtype == torch.float32
    assert out[0].min().item() == pytest.approx(-1.0) and out[0].max().item() == pytest.approx(1.0)
    assert torch.equal(out[1], torch.zeros(1, 500))  # flat window -> zeros, not NaN


def test_cropping_keeps_the_head(encoder: SigmaPPGEncoder) -> None:
    """Cropping drops the tail: extra trailing samples do not reach the network."""
    x = torch.randn(1, 400)
    tail = torch.cat([x, torch.randn(1, 99)], dim=1)
    # Filtering sees only the cropped 400 samples in both cases, so inputs are identical.
    assert torch.equal(encoder.preprocess(x), encoder.preprocess(tail))


@pytest.mark.parametrize(("row", "changes"), [(0, False), (5, False), (128, False), (1, True)])
def test_every_token_uses_pos_embed_row_1(encoder: SigmaPPGEncoder, row: int, changes: bool) -> None:
    x = encoder.preprocess(torch.randn(2, 500))
    with torch.no_grad():
        before = encoder.forward_features(x)
        saved = encoder.pos_embed[0, row].clone()
        encoder.pos_embed[0, row] += 1.0
        after = encoder.forward_features(x)
        encoder.pos_embed[0, row] = saved
    assert (not torch.equal(before, after)) is changes


def test_cls_token_gets_row_1_too(encoder: SigmaPPGEncoder) -> None:
    """Adding v to pos_embed row 1 equals adding v to the CLS token and to every patch token."""
    x = encoder.preprocess(torch.randn(1, 300))
    delta = torch.randn(360)
    with torch.no_grad():
        encoder.pos_embed[0, 1] += delta
        via_pos = encoder.forward_features(x)
        encoder.pos_embed[0, 1] -= delta
        encoder.cls_token[0, 0] += delta
        encoder.time_embed[0, :3] += delta
        via_tokens = encoder.forward_features(x)
        encoder.cls_token[0, 0] -= delta
        encoder.time_embed[0, :3] -= delta
    assert torch.allclose(via_pos, via_tokens, atol=1e-5)


def test_dropout_only_in_train_mode(small: SigmaPPGEncoder) -> None:
    x = torch.randn(2, 500)
    with torch.no_grad():
        assert torch.equal(small(x), small(x))
        small.train()
        try:
            torch.manual_seed(1)
            a = small(x)
            b = small(x)
        finally:
            small.eval()
    assert not torch.equal(a, b)


def count_dropout_calls(model: SigmaPPGEncoder, x: torch.Tensor) -> int:
    """Seeded train-mode forward of ``model``, counting the forward calls of its ``nn.Dropout`` modules."""
    calls = [0]

    def hook(*_: object) -> None:
        calls[0] += 1

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    model.train()
    try:
        torch.manual_seed(3)
        with torch.no_grad():
            model(x)
    finally:
        model.eval()
        for handle in handles:
            handle.remove()
    return calls[0]


def test_dropout_once_per_mlp_as_the_authors(encoder: SigmaPPGEncoder, small: SigmaPPGEncoder) -> None:
    """The authors' block drops out after attention, after its projection and once after ``fc2``, plus the
    dropout on the token sum: 1 + 3 x 18 = 55 calls per forward (a second MLP dropout after GELU made 73)."""
    x = torch.randn(2, 500)
    assert count_dropout_calls(encoder, x) == 1 + 3 * 18
    assert count_dropout_calls(small, x) == 1 + 3 * 2


def test_mlp_drops_out_after_fc2_only(small: SigmaPPGEncoder) -> None:
    """Train-mode MLP output equals dropout(fc2(gelu(fc1(x)))) drawn from the same seed."""
    mlp = small.blocks[0].mlp
    x = torch.randn(2, 6, 360)
    mlp.train()
    try:
        torch.manual_seed(5)
        with torch.no_grad():
            got = mlp(x)
    finally:
        mlp.eval()
    torch.manual_seed(5)
    with torch.no_grad():
        hidden = torch.nn.functional.gelu(mlp.fc1(x))
        want = torch.nn.functional.dropout(mlp.fc2(hidden), mlp.drop.p, training=True)
    assert torch.equal(got, want)


def test_checkpoint_round_trip(encoder: SigmaPPGEncoder, tmp_path: Path) -> None:
    path = tmp_path / "sigma.pth"
    torch.save(sigma_checkpoint(encoder), path)
    x = torch.randn(2, 500)
    torch.manual_seed(1)
    fresh = SigmaPPGEncoder(checkpoint=str(path)).eval()
    with torch.no_grad():
        assert torch.equal(fresh(x), encoder(x))
    assert fresh.checkpoint_path == str(path)
    # The aliases still share storage after loading.
    assert fresh.patch_embed_seq[1].weight is fresh.patch_embed_projection.weight


def test_checkpoint_with_pickled_training_state(small: SigmaPPGEncoder, tmp_path: Path) -> None:
    """argparse args in the training state: plain weights_only refuses them, our allow-list loads them."""
    path = tmp_path / "sigma.pth"
    torch.save(sigma_checkpoint(small, args=argparse.Namespace(lr=1e-4)), path)
    fresh = SigmaPPGEncoder(depth=2, random_init=True)
    fresh.load_pretrained(path)
    assert torch.equal(fresh.norm.weight, small.norm.weight)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("missing", "missing keys [blocks.1.attn.k_norm.bias]"),
        ("extra", "unexpected keys [blocks.2.gamma_1]"),
        ("shape", "wrong shapes [time_embed]"),
    ],
)
def test_damaged_checkpoint_is_refused(
    small: SigmaPPGEncoder, tmp_path: Path, damage: str, expected: str
) -> None:
    ckpt = sigma_checkpoint(small)
    state = ckpt["model"]
    assert isinstance(state, dict)
    if damage == "missing":
        del state["student.blocks.1.attn.k_norm.bias"]
    elif damage == "extra":
        state["student.blocks.2.gamma_1"] = torch.zeros(360)
    else:
        state["student.time_embed"] = torch.zeros(1, 16, 360)
    path = tmp_path / "bad.pth"
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError) as info:
        SigmaPPGEncoder(depth=2, random_init=True).load_pretrained(path)
    assert expected in str(info.value)


@pytest.mark.parametrize("ckpt", [{"epoch": 3}, {"model": {"lm_head.weight": torch.zeros(1)}}, [1, 2]])
def test_wrong_container_is_refused(tmp_path: Path, ckpt: object) -> None:
    path = tmp_path / "odd.pth"
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError, match="sigmappg"):
        SigmaPPGEncoder(depth=2, random_init=True).load_pretrained(path)
