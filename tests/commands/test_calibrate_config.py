"""``ppgbench calibrate --config`` resolves a config exactly as ``fit`` does (issue 32 point 4).

An ``init`` template whose model lives in a package of the working folder: ``fit`` imports it (the working
folder is on the import path, as under ``python -m``), so ``calibrate`` must too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

import ppgbench_pl.benchmark.calibrate as calibrate_module
from ppgbench_pl.benchmark.cost_model import CostModel
from ppgbench_pl.commands.init import add_init_parser
from tests.cli_helpers import run_cli

NET = """import torch
from torch import nn


class MyPPGNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(-1)
"""


def test_calibrate_config_imports_a_module_of_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="ppgbench")
    add_init_parser(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args(["init", str(tmp_path / "my_model")])
    ns.func(ns)
    (tmp_path / "mypackage").mkdir()
    (tmp_path / "mypackage" / "__init__.py").write_text("")
    (tmp_path / "mypackage" / "models.py").write_text(NET)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.setenv("PPGBENCH_CALIBRATION_DIR", str(tmp_path / "calibration"))
    seen: dict[str, Any] = {}

    def measured(encoders: list[dict[str, Any]], trainer: dict[str, Any], window_s: float = 10.0) -> CostModel:
        seen["encoders"], seen["trainer"] = encoders, trainer
        return CostModel("test", calibrated=True)

    monkeypatch.setattr(calibrate_module, "calibrate", measured)
    code, _, err = run_cli(["calibrate", "--config", "my_model/my_model.yaml"], capsys)
    assert code == 0, err
    modules = [e["init_args"]["module"]["class_path"] for e in seen["encoders"] if "module" in e.get("init_args", {})]
    assert modules == ["mypackage.models.MyPPGNet"]
    assert seen["trainer"].get("devices") == 1  # stacked as fit stacks it (the template's trainer block)
