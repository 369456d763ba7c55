"""The published tables, bolding and verdicts stay as they were before the paired statistics (issue 19).

The golden files were written by the report of commit 65288da (before the paired effects, MDD and
multiplicity columns existed) on three runs: the showcase run (two regimes, controls, 5 seeds x 1
fold), a simulated 5 seeds x 5 folds run with two PPG models, and the quickstart (``ppgbench fit --config
configs/quickstart.yaml``: the small CNN, the PRV control and the constant, linear regime, 5 seeds x 5
folds on every synthetic task; its 200 records, slimmed to what the tables read, are
``golden19/quickstart_records.json``; the old report gave the same tables on the slim and the full run). Only the columns that existed then are
compared, so columns added later (by any issue) do not break the test, but a changed mean, CI, bold
cell, baseline verdict, row status or ranking does. Regenerate with ``PPGBENCH_WRITE_GOLDEN=1``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from ppgbench_pl.report import build_report
from ppgbench_pl.results.records import write_job
from tests.report.fabricate import write_showcase_run
from tests.report.fabricate_grid import write_grid_run

GOLDEN = Path(__file__).parent / "golden19"
FILES = ("main_cells.csv", "chance_cells.csv", "control_cells.csv", "ranking.csv")
SKILLS = {"P": 0.7, "Q": 0.9, "prv_published": 1.0, "moment_small": 1.1}


def _runs(root: Path) -> dict[str, Path]:
    show, grid, quick = root / "showcase", root / "grid", root / "quickstart"
    write_showcase_run(show)
    write_grid_run(grid, SKILLS)
    for record in json.loads((GOLDEN / "quickstart_records.json").read_text()):
        write_job(quick, record["job_id"], record)
    return {"showcase": show, "grid": grid, "quickstart": quick}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    out = {}
    for name, run in _runs(root).items():
        build_report([run], root / f"{name}_report")
        out[name] = root / f"{name}_report" / "tables"
    return out


@pytest.mark.parametrize("run", ["showcase", "grid", "quickstart"])
@pytest.mark.parametrize("name", FILES)
def test_default_report_tables_are_unchanged(reports, run, name):
    today = pd.read_csv(reports[run] / name, keep_default_na=False, dtype=str)
    golden_path = GOLDEN / f"{run}__{name}"
    if os.environ.get("PPGBENCH_WRITE_GOLDEN"):
        today.to_csv(golden_path, index=False)
    golden = pd.read_csv(golden_path, keep_default_na=False, dtype=str)
    assert set(golden.columns) <= set(today.columns), "a published column was removed"
    pd.testing.assert_frame_equal(today[golden.columns], golden)
