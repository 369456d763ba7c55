"""``base: other.yaml`` in a config stacks it on its base, as two --config files would."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ppgbench_pl.commands.config_bases import expand_bases
from ppgbench_pl.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_a_regime_file_expands_to_its_base_then_itself_and_later_flags_stay_after(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "root.yaml").write_text("seed_everything: 1\n")
    (tmp_path / "shared" / "base.yaml").write_text("base: root.yaml\ndata: {init_args: {dataset: dalia}}\n")
    (tmp_path / "regime.yaml").write_text("base: shared/base.yaml\noutput_dir: out\n")
    argv = ["--config", str(tmp_path / "regime.yaml"), "--output_dir", "x"]
    out = expand_bases(argv)
    assert out[0:2] == ["--config", str((tmp_path / "shared" / "root.yaml").resolve())]
    assert out[2] == "--config" and yaml.safe_load(out[3]) == {"data": {"init_args": {"dataset": "dalia"}}}
    assert out[4] == "--config" and yaml.safe_load(out[5]) == {"output_dir": "out"}
    assert out[6:] == ["--output_dir", "x"]
    assert expand_bases(["--config=" + str(tmp_path / "shared" / "root.yaml")]) == [
        "--config=" + str(tmp_path / "shared" / "root.yaml")]  # no base: untouched


@pytest.mark.parametrize("content,message", [
    ("base: missing.yaml\n", "no such file"),
    ("base: self.yaml\n", "already in the chain"),
    ("base: 3\n", "must name a YAML file"),
])
def test_a_bad_base_is_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "self.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as err:
        expand_bases(["--config", str(path)])
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_every_regime_file_holds_only_its_regime_and_stacks_on_the_shared_base():
    for path in sorted(CONFIGS.glob("regime_*.yaml")):
        content = yaml.safe_load(path.read_text())
        assert content["base"] == "base.yaml", path
        assert set(content) <= {"base", "output_dir", "trainer"}, path
        assert "callbacks" in content["trainer"] and set(content["trainer"]) <= {"callbacks", "accelerator"}, path
