"""``ppgbench init``: writes the starter config, which parses and runs, and never overwrites."""

from __future__ import annotations

import argparse
import csv
import importlib
import re
from pathlib import Path

import pytest
import yaml

from ppgbench_pl.cli import main
from ppgbench_pl.commands.init import TEMPLATE, add_init_parser, template_text
from ppgbench_pl.errors import ConfigError, PPGBenchError

TINY_NET = "tests.encoders.test_custom.TinyConvNet"


def run_init(*argv: str) -> None:
    parser = argparse.ArgumentParser(prog="ppgbench")
    add_init_parser(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args(["init", *argv])
    ns.func(ns)


def test_writes_template_into_new_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "project" / "configs"
    run_init(str(folder))
    written = folder / TEMPLATE
    assert written.read_text() == template_text()
    assert f"wrote {written}" in capsys.readouterr().out
    config = yaml.safe_load(written.read_text())
    encoder = config["model"]["init_args"]["encoder"]
    assert encoder["class_path"] == "ppgbench_pl.encoders.custom.CustomEncoder"
    assert {"module", "name", "sampling_rate"} <= set(encoder["init_args"])
    for commented in ("checkpoint:", "preprocess:", "state_dict_key:", "key_prefix:"):
        assert f"# {commented}" in written.read_text()


def test_every_class_path_in_the_template_imports() -> None:
    paths = re.findall(r"class_path: ([\w.]+)", template_text())
    assert len(paths) >= 8
    for path in paths:
        if path.startswith("mypackage."):  # the placeholder the user replaces
            continue
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), path


def test_default_folder_is_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_init()
    assert (tmp_path / TEMPLATE).is_file()


def test_second_init_refuses_and_keeps_the_file(tmp_path: Path) -> None:
    run_init(str(tmp_path))
    target = tmp_path / TEMPLATE
    target.write_text("edited: true\n")
    with pytest.raises(ConfigError) as info:
        run_init(str(tmp_path))
    assert isinstance(info.value, PPGBenchError)  # main() prints it as one line and exits with 2
    message = str(info.value)
    assert str(target) in message and "already exists" in message and "\n" not in message
    assert target.read_text() == "edited: true\n"


def test_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot create the folder"):
        run_init(str(blocker))


def test_written_config_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    run_init(str(tmp_path))
    path = tmp_path / TEMPLATE
    text = path.read_text()
    edits = {
        "mypackage.models.MyPPGNet": TINY_NET,
        "sampling_rate: 125 ": "sampling_rate: 32 ",
        "pooling: none ": "pooling: mean ",
        "results/my_model": str(tmp_path / "results"),
        "data/processed": str(tmp_path / "data"),
    }
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    main(["fit", "--config", str(path), "--progress", "false",
          "--data.init_args.synthetic_subjects", "10", "--data.init_args.synthetic_windows", "4",
          "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]",
          "--data.init_args.tasks", "[synthetic-hr]"])
    with (tmp_path / "results" / "summary.csv").open() as handle:
        models = {row["model"] for row in csv.DictReader(handle)}
    assert {"my_model (random init)", "prv_published"} <= models  # no checkpoint: labelled, never silent
