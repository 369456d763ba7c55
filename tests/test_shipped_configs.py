"""Every shipped config evaluates the published PRV control; the NeuroKit2 variant is only ever opt-in."""

from pathlib import Path

import pytest
import yaml

from ppgbench_pl.commands.config_bases import chain
from ppgbench_pl.encoders.prv import PRVEncoder, PublishedPRVEncoder

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PUBLISHED = "ppgbench_pl.encoders.prv.PublishedPRVEncoder"
NEUROKIT2 = "ppgbench_pl.encoders.prv.PRVEncoder"
RUNNABLE = sorted(p.name for p in CONFIGS.glob("*.yaml"))


def load_stacked(path: Path) -> dict:
    """A config's top-level keys with its bases' (``base: ...``) under them, as stacked ``--config`` files give."""
    merged: dict = {}
    for file, content in chain(path):
        merged.update((yaml.safe_load(file.read_text()) if content is None else content) or {})
    return merged


def control_paths(config: dict) -> list[str]:
    return [entry["class_path"] for entry in config.get("controls") or []]


def test_the_two_prv_variants_cannot_be_confused():
    assert PublishedPRVEncoder.name == "prv_published"
    assert PRVEncoder.name == "prv_neurokit2"


@pytest.mark.parametrize("name", RUNNABLE)
def test_shipped_config_evaluates_the_published_prv_control(name):
    config = load_stacked(CONFIGS / name)  # a regime file's controls come from its base
    controls = control_paths(config)
    assert PUBLISHED in controls, f"{name} must evaluate the published PRV control"
    assert NEUROKIT2 not in controls, f"{name} must not evaluate the NeuroKit2 PRV variant by default"


def test_the_full_benchmark_has_all_three_controls():
    config = yaml.safe_load((CONFIGS / "benchmark.yaml").read_text())
    assert control_paths(config) == [PUBLISHED, "ppgbench_pl.encoders.moment.MomentSmallEncoder"]


@pytest.mark.parametrize("path", sorted((CONFIGS / "encoders").glob("*.yaml")), ids=lambda p: p.name)
def test_encoder_configs_add_no_controls(path):
    """Stacked on a run config, an encoder file replaces the model and leaves the control set alone."""
    assert "controls" not in yaml.safe_load(path.read_text())
