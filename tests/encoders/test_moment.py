"""MOMENT-1-small: keys and shapes match the manifest (minus the reconstruction head), forward works at
every benchmark length, RevIN and the padding mask behave, and HF-style checkpoints load strictly,
reproduce outputs, and are refused clearly when damaged or described by a different config."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ppgbench_pl.encoders.moment import PE_KEY, MomentSmallEncoder, check_moment_config, sinusoid_table
from ppgbench_pl.errors import CheckpointError
from tests.encoders.manifest_tools import load_manifest, manifest_shapes, module_shapes, parameter_count

MANIFEST = load_manifest("moment_small")
HEAD = ("head.linear.weight", "head.linear.bias")
LENGTHS_64HZ = (512, 640, 384, 135, 100)


@pytest.fixture(scope="module")
def encoder() -> MomentSmallEncoder:
    torch.manual_seed(0)
    return MomentSmallEncoder(random_init=True).eval()


@pytest.fixture(scope="module")
def source() -> MomentSmallEncoder:
    """Random weights unlike a fresh init (non-zero mask embedding, non-unit norms)."""
    torch.manual_seed(1)
    model = MomentSmallEncoder(random_init=True).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("mask_embedding") or "layer_norm" in name:
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
    return model


def full_state(model: MomentSmallEncoder, with_pe: bool = True) -> dict[str, torch.Tensor]:
    """The state at load time upstream: our keys plus the reconstruction head (``pe`` optional)."""
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if not with_pe:
        del state[PE_KEY]
    state["head.linear.weight"] = torch.randn(8, 512)
    state["head.linear.bias"] = torch.randn(8)
    return state


def write_folder(folder: Path, state: dict[str, torch.Tensor], config: dict | None = None) -> Path:
    """An HF-style model folder: ``config.json`` + ``model.safetensors``."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / "model.safetensors"))
    cfg = config if config is not None else MANIFEST["constructor_kwargs"]["config"]
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.fixture(scope="module")
def ckpt_dir(source: MomentSmallEncoder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_folder(tmp_path_factory.mktemp("moment") / "MOMENT-1-small", full_state(source))


def test_keys_and_shapes_match_manifest_without_head(encoder: MomentSmallEncoder) -> None:
    want = {k: v for k, v in manifest_shapes(MANIFEST).items() if k not in HEAD}
    assert len(want) == MANIFEST["state_dict_after_init_embedding"]["num_entries"]
    assert module_shapes(encoder) == want
    assert list(encoder.state_dict()) == list(want)  # same order as upstream


def test_parameter_count(encoder: MomentSmallEncoder) -> None:
    counts = MANIFEST["parameter_count"]
    assert parameter_count(encoder) == counts["total_parameters_embedding_mode"]
    assert encoder.encoder.embed_tokens.weight.numel() == counts["of_which_unused_t5_token_embedding"]
    assert sum(b.numel() for b in encoder.buffers()) == counts["buffer_elements"]
    assert not encoder.encoder.gradient_checkpointing
    expected = ("moment_small (random init)", 64.0, 512)
    assert (encoder.name, encoder.sampling_rate, encoder.embed_dim) == expected


def test_position_table_is_the_sinusoid() -> None:
    table = sinusoid_table(5000, 512)
    assert torch.allclose(table[0, 0, 0::2], torch.zeros(256))
    assert torch.allclose(table[0, 0, 1::2], torch.ones(256))
    assert torch.isclose(table[0, 3, 0], torch.sin(torch.tensor(3.0)))


@pytest.mark.parametrize("length", LENGTHS_64HZ)
def test_forward_shapes_at_benchmark_lengths(encoder: MomentSmallEncoder, length: int) -> None:
    torch.manual_seed(length)
    with torch.no_grad():
        out = encoder(torch.randn(2, length))
    assert out.shape == (2, 512) and torch.isfinite(out).all()


def test_short_window_is_refused(encoder: MomentSmallEncoder) -> None:
    with pytest.raises(ValueError, match="at least 8"):
        encoder(torch.randn(1, 7))


def test_revin_makes_output_invariant_to_affine_rescaling(encoder: MomentSmallEncoder) -> None:
    torch.manual_seed(2)
    x = torch.randn(2, 640)
    with torch.no_grad():
        ref = encoder(x)
        scaled = encoder(3.7 * x - 12.0)
    torch.testing.assert_close(scaled, ref, atol=1e-4, rtol=1e-4)


def test_nan_and_constant_windows_stay_finite(encoder: MomentSmallEncoder) -> None:
    x = torch.randn(2, 512)
    x[0, 10:20] = float("nan")
    x[1] = 5.0
    with torch.no_grad():
        assert torch.isfinite(encoder(x)).all()


def test_default_mode_does_not_pad(encoder: MomentSmallEncoder) -> None:
    x, mask = encoder.context(torch.randn(2, 1, 135))
    assert x.shape == (2, 1, 135) and bool(mask.all())


def test_pad_to_context_masks_the_padding(source: MomentSmallEncoder) -> None:
    torch.manual_seed(3)
    x = torch.randn(2, 1, 135)
    model = copy.deepcopy(source)
    model.pad_to_context = True
    padded, mask = model.context(x)
    assert padded.shape == (2, 1, 512) and int(mask[0].sum()) == 135 and not bool(mask[:, :377].any())
    with torch.no_grad():
        out = model.forward_features(x)
        garbage = padded.clone()
        garbage[..., :377] = 1e3 * torch.randn(2, 1, 377)
        torch.testing.assert_close(model.embed(garbage, mask), out)  # pad values never matter
        model.patch_embedding.mask_embedding.add_(torch.randn(512))  # padded tokens are masked out
        torch.testing.assert_close(model.forward_features(x), out, atol=1e-5, rtol=1e-5)
        unmasked = model.embed(padded, torch.ones_like(mask))
    assert out.shape == (2, 512) and torch.isfinite(out).all()
    assert not torch.allclose(unmasked, out, atol=1e-3)


def test_pad_to_context_keeps_last_512_of_longer_windows(encoder: MomentSmallEncoder) -> None:
    x = torch.randn(1, 1, 640)
    model = copy.deepcopy(encoder)
    model.pad_to_context = True
    with torch.no_grad():
        torch.testing.assert_close(model.forward_features(x), encoder.forward_features(x[..., -512:]))


def test_hf_folder_loads_strictly_and_reproduces(source: MomentSmallEncoder, ckpt_dir: Path) -> None:
    torch.manual_seed(4)
    x = torch.randn(2, 640)
    target = MomentSmallEncoder(checkpoint=ckpt_dir).eval()
    with torch.no_grad():
        torch.testing.assert_close(target(x), source(x))
    assert "head" not in dict(target.named_children())
    digest = target.checkpoint_digest()
    assert len(digest) == 64
    # the weights file alone (its config.json sits beside it)
    single = MomentSmallEncoder(random_init=True).eval()
    single.load_pretrained(ckpt_dir / "model.safetensors")
    assert single.checkpoint_digest() == digest
    with torch.no_grad():
        torch.testing.assert_close(single(x), source(x))


def test_checkpoint_without_pe_loads(source: MomentSmallEncoder, tmp_path: Path) -> None:
    weights = tmp_path / "moment_no_pe.safetensors"
    save_file(full_state(source, with_pe=False), str(weights))
    target = MomentSmallEncoder(random_init=True).eval()
    target.load_pretrained(weights)
    x = torch.randn(1, 512)
    with torch.no_grad():
        torch.testing.assert_close(target(x), source(x))


def test_torch_file_loads(source: MomentSmallEncoder, tmp_path: Path) -> None:
    weights = tmp_path / "moment.pt"
    torch.save(full_state(source), weights)
    target = MomentSmallEncoder(random_init=True).eval()
    target.load_pretrained(weights)
    x = torch.randn(1, 384)
    with torch.no_grad():
        torch.testing.assert_close(target(x), source(x))


DAMAGE = {
    "missing": ("encoder.block.3.layer.1.DenseReluDense.wo.weight", "missing keys"),
    "unexpected": ("encoder.block.8.layer.0.layer_norm.weight", "unexpected keys"),
    "wrong_shape": ("patch_embedding.value_embedding.weight", "wrong shapes"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_checkpoint_is_refused(source: MomentSmallEncoder, tmp_path: Path, kind: str) -> None:
    key, phrase = DAMAGE[kind]
    state = full_state(source)
    if kind == "missing":
        del state[key]
    elif kind == "unexpected":
        state[key] = torch.ones(512)
    else:
        state[key] = torch.randn(512, 16)
    folder = write_folder(tmp_path / kind, state)
    with pytest.raises(CheckpointError, match=phrase) as info:
        MomentSmallEncoder(random_init=True).load_pretrained(folder)
    assert key in str(info.value) and "\n" not in str(info.value)


def test_unknown_head_key_is_not_silently_dropped(source: MomentSmallEncoder, tmp_path: Path) -> None:
    state = full_state(source)
    state["head.dropout.weight"] = torch.ones(1)
    folder = write_folder(tmp_path / "extra_head", state)
    with pytest.raises(CheckpointError, match=r"unexpected keys \[head.dropout.weight\]"):
        MomentSmallEncoder(random_init=True).load_pretrained(folder)


def test_folder_without_weights_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        MomentSmallEncoder(random_init=True).load_pretrained(tmp_path)


def small_folder(folder: Path, config: dict) -> Path:
    """A config.json with placeholder weights: the config check comes first."""
    return write_folder(folder, {"x": torch.zeros(1)}, config)


def test_config_with_other_d_model_is_refused(tmp_path: Path) -> None:
    config = copy.deepcopy(MANIFEST["constructor_kwargs"]["config"])
    config["t5_config"]["d_model"] = 768
    with pytest.raises(CheckpointError, match=r"d_model=768 \(expected 512\)") as info:
        MomentSmallEncoder(random_init=True).load_pretrained(small_folder(tmp_path / "m", config))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"patch_len": 16}, "patch_len=16"),
        ({"d_model": 1024}, "d_model=1024"),
        ({"t5_config": None, "transformer_backbone": "google/flan-t5-large"}, "transformer_backbone"),
    ],
)
def test_config_checks_moment_settings(change: dict, phrase: str) -> None:
    config = {**MANIFEST["constructor_kwargs"]["config"], **change}
    with pytest.raises(CheckpointError, match=phrase):
        check_moment_config(config, source="config.json")


def test_config_check_accepts_manifest_and_nested_forms() -> None:
    config = MANIFEST["constructor_kwargs"]["config"]
    check_moment_config(config, source="config.json")
    check_moment_config({"config": config}, source="config.json")
    check_moment_config({}, source="config.json")  # nothing stated: the strict shape check decides
    nested_bad = {"config": {**config, "t5_config": {**config["t5_config"], "num_heads": 8, "num_layers": 6}}}
    with pytest.raises(CheckpointError, match="num_layers=6.*num_heads=8|num_heads=8.*num_layers=6"):
        check_moment_config(nested_bad, source="config.json")
