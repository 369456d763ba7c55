"""Issue 18 item 11 end to end on the real BUT PPG format: a partial download (blood pressure for one
participant) skips the tasks it cannot evaluate and runs the others, instead of stopping the whole fit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.bad_input.test_corpus import CNN, LINEAR, fit
from tests.benchmark.helpers import record_files, status, write_config
from tests.data.butppg.make_data import INFO_COLUMNS, _pulse, write_record

PARTICIPANTS = ("100", "101", "102", "103", "104", "105")


def _partial_download(raw: Path) -> None:
    """Six participants with two good records each; only participant 100 has a blood pressure."""
    rng = np.random.default_rng(7)
    info, quality = [], []
    for p in PARTICIPANTS:
        for k in (1, 2):
            record = f"{p}00{k}"
            hr = float(rng.uniform(55, 95))
            write_record(raw, record, "single", _pulse(rng, hr), rng)
            quality.append({"ID": record, "Quality": 1, "HR": hr})
            bp = "128/85" if p == "100" else "NA"
            cells = [record, "F", 40, 170, 70, "finger", 0, bp, f"{rng.uniform(94, 99):.0f}",
                     f"{rng.uniform(4, 7):.1f}"]
            info.append(dict(zip(INFO_COLUMNS, cells, strict=True)))
    pd.DataFrame(info).to_csv(raw / "subject-info.csv", index=False, encoding="utf-8-sig")
    pd.DataFrame(quality).to_csv(raw / "quality-hr-ann.csv", index=False, encoding="utf-8-sig")


def test_a_partial_butppg_download_runs_the_tasks_it_can(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw, processed, out = tmp_path / "raw", tmp_path / "processed", tmp_path / "run"
    raw.mkdir()
    _partial_download(raw)
    code, _, err = fit(capsys, "butppg", "--raw-root", str(raw), "--output", str(processed), "--fs", "64",
                       command="preprocess")
    assert code == 0, err
    config = {
        "output_dir": str(out), "controls": [], "wandb": "off", "progress": False,
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"encoder": CNN}},
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule",  # no tasks named: all of BUT PPG's
                 "init_args": {"dataset": "butppg", "root": str(processed), "seeds": [42], "folds": [0]}},
        "trainer": {"accelerator": "cpu", "devices": 1, "callbacks": [LINEAR]},
    }
    code, _, err = fit(capsys, "--config", str(write_config(tmp_path / "butppg.yaml", config)))
    assert code == 0 and "Traceback" not in err, err
    assert re.search(r"^skipped 2 task\(s\) that cannot be evaluated .*butppg-sbp.*butppg-dbp|"
                     r"^skipped 2 task\(s\) that cannot be evaluated .*butppg-dbp.*butppg-sbp", err, re.M), err
    ran = {json.loads(p.read_text())["task"] for p in record_files(out)}
    assert {"butppg-glyc", "butppg-spo2"} <= ran and not ran & {"butppg-sbp", "butppg-dbp"}, ran
    state = status(out)
    assert sorted(state["skipped_tasks"]) == ["butppg-dbp", "butppg-sbp"] and state["complete"], state
    assert "1 groups with valid labels" in state["skipped_tasks"]["butppg-sbp"]
