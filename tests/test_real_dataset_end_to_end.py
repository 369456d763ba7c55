"""A real dataset's path end to end: raw files (DaLiA's format) -> preprocess -> fit -> report."""

import json
from pathlib import Path

import pandas as pd

from tests.cli_helpers import run_cli as run
from tests.data.dalia import make_data as dalia_data

ROOT = Path(__file__).resolve().parents[1]


def test_dalia_raw_to_summary_and_report(tmp_path, capsys):
    dalia_data.make(tmp_path / "raw" / "dalia", subjects=(1, 2, 3, 4, 5, 10), duration_s=60)
    # Each encoder reads the tree at its own rate: 64 Hz for the small CNN, 100 Hz for the PRV control.
    code, _, err = run(["preprocess", "dalia", "--raw-root", str(tmp_path / "raw"), "--fs", "64", "100",
                        "--output", str(tmp_path / "processed")], capsys)
    assert code == 0, err
    code, out, err = run([
        "fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--output_dir", str(tmp_path / "run"),
        "--data.init_args.dataset", "dalia", "--data.init_args.root", str(tmp_path / "processed"),
        "--data.init_args.tasks", "[dalia-hr, dalia-activity]", "--data.init_args.seeds", "[42]",
        "--data.init_args.folds", "[0, 1]", "--controls",
        '[{"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder", "init_args": {"n_jobs": 1}}]',
        "--progress", "false",
    ], capsys)
    assert code == 0, err
    summary = pd.read_csv(tmp_path / "run" / "summary.csv")
    assert set(summary.task) == {"dalia-hr", "dalia-activity"}
    models = set(summary.model)  # the constant baseline once per task view (64 Hz and 100 Hz)
    assert {"small_cnn", "prv_published"} <= models
    assert all(m.startswith("constant") for m in models - {"small_cnn", "prv_published"}) and len(models) > 2
    records = [json.loads(p.read_text()) for p in (tmp_path / "run" / "jobs").glob("*/results.json")]
    assert len(records) == 2 * 2 * 2 and all(r["status"] == "ok" for r in records)
    for r in records:
        assert set(r["train_groups"]).isdisjoint(r["test_groups"])
        assert len(r["train_groups"]) + len(r["test_groups"]) == 6
    code, out, err = run(["report", str(tmp_path / "run"), "--output", str(tmp_path / "report")], capsys)
    assert code == 0, err
    assert (tmp_path / "report" / "index.html").exists()
