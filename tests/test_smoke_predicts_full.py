"""A smoke run that predicts the real one (issue 32 point 3), on the built-in synthetic dataset.

The smoke budget keeps 10 of 30 subjects, stratified on the tasks' labels, and trains the searched regimes'
regression heads on z-scored targets. Its constant baseline must then be close to the full run's (the
test fold's subjects look like everyone), and its searched MLP must not lose to that baseline.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.benchmark.job import baseline_metrics
from ppgbench_pl.datamodules import PPGDataModule
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
MLP = '[{"class_path": "ppgbench_pl.regimes.LinearRegime"}, {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime"}]'


def full_run_baseline(root: Path, task: str) -> float:
    """The constant baseline of the full run (5 seeds x 5 folds, every subject), from the data alone."""
    data = PPGDataModule(dataset="synthetic", root=str(root))
    values = []
    for seed in (42, 43, 44, 45, 46):
        for fold in range(5):
            job = data.job(task, seed, fold, fs=64)
            ctx = SimpleNamespace(view=job.view, task=job.task, outer=lambda job=job: (job.split.train, job.split.test))
            values.append(baseline_metrics(ctx)[job.task.metric])  # type: ignore[arg-type]
    return float(np.mean(values))


def test_the_smoke_cells_resemble_the_full_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--config",
                            str(ROOT / "configs/budget/smoke.yaml"), "--output_dir", str(tmp_path / "smoke"),
                            "--data.init_args.root", str(tmp_path / "data"), "--controls", "[]",
                            "--data.init_args.tasks", "[synthetic-hr, synthetic-activity, synthetic-age]",
                            "--trainer.callbacks", MLP, "--wandb", "off", "--progress", "false"], capsys)
    assert code == 0, err
    summary = pd.read_csv(tmp_path / "smoke/summary.csv")
    assert set(summary["budget"]) == {"smoke"}
    mine = summary[summary["model"] == "small_cnn"].set_index(["task", "regime"])
    for task in ("synthetic-hr", "synthetic-activity", "synthetic-age"):  # age: 45.9 against 17.0 by name
        smoke_baseline = float(mine.loc[(task, "linear"), "baseline_mean"])
        full = full_run_baseline(tmp_path / "data", task)
        assert abs(smoke_baseline - full) <= 0.25 * full, (task, smoke_baseline, full)
    hr = mine.loc[("synthetic-hr", "mlp")]
    assert hr["mean"] < hr["baseline_mean"]  # 74 bpm against a baseline of 18 before targets were z-scored
    activity = mine.loc[("synthetic-activity", "mlp")]
    assert activity["mean"] > activity["baseline_mean"]
