"""Every registered encoder: a test case, published build, forward, stable digest, a config, a table row.

The case table is explicit on purpose (braindecode-style completeness): adding an encoder to
``ENCODERS`` without a case, a manifest decision and a ``configs/encoders/<name>.yaml`` fails here.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch
import yaml

from ppgbench_pl.cli import main
from ppgbench_pl.encoders import ENCODERS, FOUNDATION_MODELS, PPGEncoder
from tests.encoders.manifest_tools import MANIFEST_DIR, load_manifest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
ENCODER_CONFIGS = ROOT / "configs" / "encoders"


@dataclass(frozen=True)
class Case:
    """Test settings of one registry entry.

    Attributes:
        length: Representative window (8 s, the DaLiA/WildPPG length) in samples at the native rate.
        manifest: Name of its manifest in ``tests/fixtures/encoders`` (None: no published weights).
    """

    length: int
    manifest: str | None


CASES: dict[str, Case] = {
    "papagei_p": Case(1000, "papagei_p"),
    "papagei_s": Case(1000, "papagei_s"),
    "pulseppg": Case(400, "pulseppg"),
    "anyppg": Case(1000, "anyppg"),
    "sigmappg": Case(400, "sigmappg"),
    "moment_small": Case(512, "moment_small"),
    "prv_neurokit2": Case(800, None),
    "prv_published": Case(800, None),
    "small_cnn": Case(512, None),
}
NAMES = list(ENCODERS)


@functools.cache
def build_encoder(name: str) -> PPGEncoder:
    """One instance per registry entry and test session (the big ones take seconds to build).

    The published models get ``random_init=True``: without their authors' checkpoints they refuse to build.
    """
    return ENCODERS[name](**published_args(name))


def published_args(name: str) -> dict[str, object]:
    """``random_init: true`` for the published models (they need it without a checkpoint), else nothing."""
    return {"random_init": True} if name in FOUNDATION_MODELS else {}


def ready(name: str) -> PPGEncoder:
    """The shared instance, reset to a plain state (gradients on, no stale grads, eval mode)."""
    encoder = build_encoder(name)
    encoder.requires_grad_(True)
    encoder.zero_grad(set_to_none=True)
    return encoder.eval()


def random_batch(name: str, batch: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    """PPG-scaled random windows at the case length, labels and per-window group statistics."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, CASES[name].length, generator=gen) * 40 + 100
    return {"x": x, "y": torch.randn(batch, generator=gen), "ppg_mean": x.mean(-1), "ppg_std": x.std(-1)}


# -- completeness ---------------------------------------------------------------------------------
def test_every_registry_entry_has_a_case() -> None:
    assert set(CASES) == set(ENCODERS), "add the new encoder to CASES (and give it a manifest decision)"


def test_foundation_models_have_manifests() -> None:
    with_manifest = {name for name, case in CASES.items() if case.manifest is not None}
    assert set(FOUNDATION_MODELS) == with_manifest
    for name in with_manifest:
        assert (MANIFEST_DIR / f"{CASES[name].manifest}.json").is_file(), name
        assert load_manifest(name)["model"] == name


def test_every_registry_entry_has_a_config() -> None:
    assert {p.stem for p in ENCODER_CONFIGS.glob("*.yaml")} == set(ENCODERS)


# -- per encoder ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_builds_with_published_settings(name: str) -> None:
    encoder = ready(name)
    cls = ENCODERS[name]
    assert isinstance(encoder, PPGEncoder) and type(encoder) is cls
    assert encoder.name == cls.config_name(published_args(name))
    assert encoder.name == (f"{name} (random init)" if name in FOUNDATION_MODELS else name)
    assert encoder.embed_dim > 0 and encoder.sampling_rate > 0
    assert CASES[name].length == round(8 * encoder.sampling_rate) >= encoder.min_samples
    assert encoder.trainable == any(True for _ in encoder.parameters())
    if CASES[name].manifest is not None:
        manifest = load_manifest(name)
        assert encoder.sampling_rate == manifest["input"]["sampling_rate_hz"]
        assert encoder.embed_dim == manifest["output"]["embedding_dim"]


@pytest.mark.parametrize("name", NAMES)
def test_forward_through_wrapper(name: str) -> None:
    encoder, batch = ready(name), random_batch(name)
    with torch.no_grad():
        out = encoder(batch["x"], batch["ppg_mean"], batch["ppg_std"])
    assert out.shape == (2, encoder.embed_dim) and out.dtype == torch.float32
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_digest_follows_weights(name: str) -> None:
    encoder = ready(name)
    digest = encoder.checkpoint_digest()
    assert len(digest) == 64 and encoder.checkpoint_digest() == digest
    twin = copy.deepcopy(encoder)
    assert twin.checkpoint_digest() == digest
    params = [p for p in twin.parameters() if p.is_floating_point()]
    if not params:  # parameter-free control: its identity is its class
        assert type(encoder)().checkpoint_digest() == digest
        return
    with torch.no_grad():
        params[-1].view(-1)[0] += 1.0
    assert twin.checkpoint_digest() != digest
    assert encoder.checkpoint_digest() == digest


def test_parameter_free_controls_differ() -> None:
    assert ready("prv_neurokit2").checkpoint_digest() != ready("prv_published").checkpoint_digest()


@pytest.mark.parametrize("name", NAMES)
def test_encoder_config_stacks_onto_quickstart(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["fit", "--config", str(QUICKSTART), "--config", str(ENCODER_CONFIGS / f"{name}.yaml"),
              "--print_config"])
    assert info.value.code in (0, None)
    config = yaml.safe_load(capsys.readouterr().out)
    cls = ENCODERS[name]
    model = config["model"]
    assert model["class_path"] == "ppgbench_pl.tasks.EncoderTask"
    assert model["init_args"]["encoder"]["class_path"] == f"{cls.__module__}.{cls.__qualname__}"
    assert model["init_args"]["mode"] == "frozen"  # the run config's settings survive the stacking
    assert config["data"]["init_args"]["dataset"] == "synthetic"


# -- tools/encoder_table.py ---------------------------------------------------------------------------
def load_table_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("encoder_table", ROOT / "tools" / "encoder_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_encoder_table_covers_registry_and_writes_json(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    tool = load_table_tool()
    assert set(tool.CHECKPOINT_FORMATS) == set(ENCODERS)
    out = tmp_path / "table.json"
    assert tool.main(["--only", "small_cnn", "prv_published", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("| model | parameters | trainable |") and len(lines) == 4
    rows = json.loads(out.read_text())
    cnn = ready("small_cnn")
    assert rows["small_cnn"]["total"] == sum(p.numel() for p in cnn.parameters()) > 0
    assert (rows["small_cnn"]["embed_dim"], rows["small_cnn"]["sampling_rate"]) == (64, 64.0)
    assert rows["prv_published"]["total"] == rows["prv_published"]["trainable"] == 0
    assert "| prv_published | 0 | 0 | 8 | 100 |" in lines[3]
