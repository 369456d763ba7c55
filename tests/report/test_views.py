"""Each model is compared with the constant baseline of its own task view (its encoder's rate)."""

import pandas as pd
import pytest

from ppgbench_pl.report import build_report
from ppgbench_pl.report.compare import Rule, Scores, paired_comparisons
from ppgbench_pl.report.findings import chance_cells
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.report.tables import main_cells
from tests.report.fabricate import spread, write_cell

TASK = "synthetic-activity"  # balanced accuracy, higher is better


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("views")
    # A at 64 Hz: chance 0.50, A 0.56 -> beats its own baseline
    write_cell(run, "A", TASK, "linear", spread(0.56, 0.01), spread(0.50, 0.01), fs=64.0)
    # B at 125 Hz: chance 0.25, B 0.45 -> beats its own baseline (0.25), though not A's (0.50)
    write_cell(run, "B", TASK, "linear", spread(0.45, 0.01), spread(0.25, 0.01), fs=125.0)
    # C at 125 Hz, same view as B: below chance
    write_cell(run, "C", TASK, "linear", spread(0.20, 0.01), spread(0.25, 0.01), fs=125.0)
    return run


def test_each_model_is_judged_against_its_own_baseline(run):
    scores = Scores(load_runs([run]).records)
    assert scores.baselines(TASK, "linear") == ["constant @64Hz", "constant @125Hz"]
    assert scores.baseline_of(TASK, "linear", "A") == "constant @64Hz"
    assert scores.baseline_of(TASK, "linear", "B") == "constant @125Hz"
    assert scores.baseline_of(TASK, "linear", "C") == "constant @125Hz"
    assert scores.get(TASK, "linear", "constant @125Hz").mean == pytest.approx(0.25)
    rule = Rule("ci")
    chance = chance_cells(scores, rule)
    cells = main_cells(scores, rule, chance).set_index("model")
    assert bool(cells.loc["A", "beats_baseline"]) and bool(cells.loc["B", "beats_baseline"])
    assert not cells.loc["C", "beats_baseline"]
    assert cells.loc["B", "baseline"] == "constant @125Hz" and cells.loc["A", "view"] == "64Hz"
    row = chance.iloc[0]
    assert row["status"] == "above_chance" and row["beat_baseline"] == "A;B"
    assert row["baseline"] == "constant @64Hz;constant @125Hz"
    paired = paired_comparisons(scores)
    assert set(zip(paired["model_a"], paired["model_b"], strict=True)) == {
        ("A", "constant @64Hz"), ("B", "constant @125Hz"), ("C", "constant @125Hz")}


def test_report_order_of_jobs_does_not_change_the_baseline(run, tmp_path):
    records = load_runs([run]).records
    forward = Scores(records).summary
    backward = Scores(records[::-1]).summary
    pd.testing.assert_frame_equal(forward, backward)


def test_report_page_and_tables_show_one_baseline_column_per_view(run, tmp_path):
    index = build_report([run], tmp_path / "rep")
    md = (tmp_path / "rep" / "tables" / "main_linear.md").read_text(encoding="utf-8")
    header = md.splitlines()[2]
    assert header == "| task | metric | A | B | C | constant @64Hz | constant @125Hz |"
    assert "one baseline per task view" in md
    assert "constant @125Hz" in index.read_text(encoding="utf-8")
