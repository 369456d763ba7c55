"""Two `ppgbench fit` processes on one run folder: both finish, every job is done exactly once, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.benchmark.helpers import CNN, LAUNCH, LINEAR, suite_config, write_config

REPO = Path(__file__).resolve().parents[1]


def test_two_fits_on_one_folder_share_the_work(tmp_path, engine_root):
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, encoders=[CNN], regimes=[LINEAR], folds=[0, 1, 2, 3, 4],
                          seeds=[42, 43], tasks=["synthetic-hr", "synthetic-activity"], data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    env = {**os.environ, "WANDB_MODE": "disabled"}
    procs = [subprocess.Popen([sys.executable, "-c", LAUNCH, "fit", "--config", str(path), "--wandb", "off",
                               "--progress", "false"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert "Traceback" not in err
    records = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")]
    assert len(records) == 2 * 2 * 5  # 2 tasks x 2 seeds x 5 folds and all(r["status"] == "ok" for r in records)
    # each job was run by exactly one of the two processes: together they report every job once
    ran = sum(int(out.split(" jobs run,")[0].split()[-1]) for out, _ in outputs)
    assert ran == len(records)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["complete"] and status["completed"] == len(records)
    assert not list(run_dir.rglob("*.tmp")) and not list(run_dir.glob("jobs/*.working"))
