"""The example scripts run as a user would run them (a fresh process, output where they are told)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def test_evaluate_my_model_writes_a_report(tmp_path):
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg"}
    script = ROOT / "examples/evaluate_my_model.py"
    out = subprocess.run([sys.executable, str(script), "--output", str(tmp_path)], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "report" / "index.html").exists()
    assert (tmp_path / "summary.csv").exists() and "my_ppg_net" in out.stdout
    summary = pd.read_csv(tmp_path / "summary.csv")
    mine = summary[summary["model"] == "my_ppg_net"]
    assert set(mine["regime"]) == {"linear", "mlp"} and mine["mean"].notna().all()
