"""tools/gpu_check.sh must keep working without a GPU: its dry run is tiny and CPU-only."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu_check.sh"


def test_gpu_check_dry_run_prints_every_section():
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for section in (
        "[device]",
        "[rf] sklearn:",
        "[rf] cuML: skipped",
        "[finetune]",
        "trials/s",
        "ratio",
        "[stack] small_cnn: 8 trials",
        "[embed] small_cnn:",
        "windows/s",
        "[memory]",
    ):
        assert section in out, out


def test_gpu_check_refuses_unknown_options():
    done = subprocess.run(["bash", str(SCRIPT), "--fast"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "unknown option --fast" in done.stderr
