import math

import pandas as pd
import pytest

from ppgbench_pl.report.compare import Rule, Score, Scores, bold_models, overlaps
from ppgbench_pl.report.findings import chance_cells
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.report.tables import main_cells, to_latex, wide_table, write_main_tables
from tests.report.fabricate import spread, write_cell

BASE_BA, BASE_MAE, BASE_AGE = spread(0.50, 0.01), spread(10.0, 0.5), spread(10.0, 1.0)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    for model, mean, half in (("A", 0.80, 0.02), ("B", 0.77, 0.015), ("C", 0.74, 0.02)):
        write_cell(run, model, "synthetic-activity", "linear", spread(mean, half), BASE_BA)
    for model, mean, half in (("A", 5.0, 0.5), ("B", 3.0, 0.2), ("C", 3.4, 0.3)):
        write_cell(run, model, "synthetic-hr", "linear", spread(mean, half), BASE_MAE)
    write_cell(run, "A", "synthetic-age", "linear", spread(9.5, 0.4), BASE_AGE)
    return run


@pytest.fixture(scope="module")
def cells(run):
    scores = Scores(load_runs([run]).records)
    rule = Rule("ci")
    return scores, main_cells(scores, rule, chance_cells(scores, rule))


def test_crafted_means_and_cis_come_back(cells):
    scores, _ = cells
    a = scores.get("synthetic-activity", "linear", "A")
    assert a.mean == pytest.approx(0.80) and a.ci95 == pytest.approx(0.02) and a.n_seeds == 5
    base = scores.get("synthetic-hr", "linear", "constant")
    assert base.mean == pytest.approx(10.0) and base.ci95 == pytest.approx(0.5)


def test_bold_is_best_plus_overlapping_cis(cells):
    scores, frame = cells
    bold = {(r.task, r.model) for r in frame.itertuples() if r.bold}
    # activity (higher is better): A best; B overlaps (0.03 <= 0.035); C does not (0.06 > 0.04)
    assert {m for t, m in bold if t == "synthetic-activity"} == {"A", "B"}
    # hr (lower is better): B best; C overlaps (0.4 <= 0.5); A does not
    assert {m for t, m in bold if t == "synthetic-hr"} == {"B", "C"}
    # age: A best, and the constant baseline overlaps it
    assert bold_models(scores, "synthetic-age", "linear") == {"A", "constant"}


def test_overlap_boundary_is_inclusive_and_unknown_ci_counts_as_zero():
    assert overlaps(Score("a", 1.0, 0.25, 5, 5), Score("b", 1.5, 0.25, 5, 5))
    assert not overlaps(Score("a", 1.0, 0.25, 5, 5), Score("b", 1.5, 0.125, 5, 5))
    assert overlaps(Score("a", 1.0, math.nan, 1, 1), Score("b", 1.0, math.nan, 1, 1))
    assert not overlaps(Score("a", 1.0, math.nan, 1, 1), Score("b", 1.0001, math.nan, 1, 1))


def test_markdown_table_marks_bold_missing_and_near_chance(cells, tmp_path):
    scores, frame = cells
    paths = write_main_tables(frame, scores, Rule("ci"), tmp_path)
    assert {p.name for p in paths} == {"main_cells.csv", "main_linear.csv", "main_linear.md",
                                       "main_linear.tex"}
    md = (tmp_path / "main_linear.md").read_text(encoding="utf-8")
    lines = [line for line in md.splitlines() if line.startswith("| synthetic")]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines}
    assert rows["synthetic-activity"].count("**") == 4  # A and B bold
    assert "**0.800 ± 0.020**" in rows["synthetic-activity"]
    assert "| 0.740 ± 0.020 |" in rows["synthetic-activity"]
    # synthetic-age: A is not meaningfully better than the baseline (CIs overlap): dagger; B and C not run
    assert "synthetic-age †" in rows
    assert rows["synthetic-age †"].split(" | ")[3:5] == ["–", "–"]
    header = md.splitlines()[2]
    assert header == "| task | metric | A | B | C | constant |"


def test_csv_and_latex_variants(cells, tmp_path):
    scores, frame = cells
    write_main_tables(frame, scores, Rule("ci"), tmp_path)
    wide = pd.read_csv(tmp_path / "main_linear.csv")
    hr = wide[wide["task"] == "synthetic-hr"].iloc[0]
    assert hr["B"].endswith(" *") and hr["C"].endswith(" *") and not hr["A"].endswith("*")
    tex = (tmp_path / "main_linear.tex").read_text(encoding="utf-8")
    assert r"\textbf{0.800 $\pm$ 0.020}" in tex
    assert r"synthetic-age $^\dagger$" in tex and "--" in tex
    assert r"\begin{tabular}{llcccc}" in tex


def test_latex_escapes_specials():
    frame = pd.DataFrame({"task": ["a_b"], "metric": ["MAE ↓"], "m&n": ["**1 ± 2**"]})
    tex = to_latex(frame, "x > 50% | y")
    assert r"a\_b" in tex and r"m\&n" in tex and r"\textbf{1 $\pm$ 2}" in tex
    assert r"\textgreater{} 50\% \textbar{} y" in tex


def test_wide_table_keeps_requested_column_order(cells):
    scores, frame = cells
    wide = wide_table(frame, "linear", ["C", "constant", "A"], ["synthetic-hr"], bold=str)
    assert list(wide.columns) == ["task", "metric", "C", "constant", "A"]


def test_a_scikit_learn_forest_is_labelled_not_the_published_cuml(tmp_path):
    from ppgbench_pl.report.tables import RF_SKLEARN, backend_text

    run = tmp_path / "run"
    write_cell(run, "A", "synthetic-hr", "rf", spread(3.0, 0.2), BASE_MAE, backend="sklearn")
    write_cell(run, "B", "synthetic-hr", "rf", spread(3.2, 0.2), BASE_MAE, backend="cuml")
    write_cell(run, "A", "synthetic-hr", "linear", spread(3.1, 0.2), BASE_MAE, backend="sklearn")
    scores = Scores(load_runs([run]).records)
    table = main_cells(scores, Rule("ci"), chance_cells(scores, Rule("ci")))
    assert backend_text(table, "rf") == f"cuml (B), {RF_SKLEARN} (A)"
    assert backend_text(table, "linear") == "sklearn"  # scikit-learn is the published linear probe
    paths = write_main_tables(table, scores, Rule("ci"), tmp_path / "tables")
    rf_md = next(p for p in paths if p.name == "main_rf.md").read_text()
    assert RF_SKLEARN in rf_md


def test_a_multi_output_forest_is_not_labelled_off_the_published_cuml(tmp_path):
    """ECSMP emotion (six outputs) runs scikit-learn under every backend, as published: a cuML run's table
    called it ``sklearn (not the published cuML)``."""
    from ppgbench_pl.report.tables import RF_MULTI_OUTPUT, RF_SKLEARN, backend_text

    run = tmp_path / "run"
    write_cell(run, "P", "synthetic-hr", "rf", spread(3.0, 0.2), BASE_MAE, backend="cuml")
    write_cell(run, "P", "ecsmp-emotion-reg-cls", "rf", spread(1.0, 0.1), BASE_MAE, backend="sklearn")
    scores = Scores(load_runs([run]).records)
    table = main_cells(scores, Rule("ci"), chance_cells(scores, Rule("ci")))
    text = backend_text(table, "rf")
    assert text == f"cuml (P), {RF_MULTI_OUTPUT} (P)" and RF_SKLEARN not in text


def test_a_setting_off_the_published_protocol_is_named_in_the_cells_and_the_caption(tmp_path):
    """Records with ``deviations`` (refit, a user callback): main_cells.csv has the column and the regime's
    caption starts with NOT THE PUBLISHED PROTOCOL, naming them; published cells say nothing."""
    import json

    run = tmp_path / "run"
    write_cell(run, "A", "synthetic-hr", "mlp", spread(3.0, 0.2), BASE_MAE)
    write_cell(run, "B", "synthetic-hr", "mlp", spread(3.2, 0.2), BASE_MAE)
    write_cell(run, "A", "synthetic-hr", "linear", spread(3.1, 0.2), BASE_MAE)
    for path in run.glob("jobs/*/results.json"):
        rec = json.loads(path.read_text())
        if rec["model"] == "A" and rec["regime"] == "mlp":
            path.write_text(json.dumps({**rec, "deviations": ["refit=True", "max_depth=[5, 10]",
                                                              "callback=my.Callback"]}))
    scores = Scores(load_runs([run]).records)
    table = main_cells(scores, Rule("ci"), chance_cells(scores, Rule("ci")))
    by = table.set_index(["regime", "model"])["deviations"]
    assert by[("mlp", "A")] == "refit=True;max_depth=[5, 10];callback=my.Callback" and by[("mlp", "B")] == ""
    assert by[("linear", "A")] == ""
    paths = write_main_tables(table, scores, Rule("ci"), tmp_path / "tables")
    mlp_md = next(p for p in paths if p.name == "main_mlp.md").read_text()
    # a list value stays whole (it was cut at its comma)
    assert mlp_md.startswith("NOT THE PUBLISHED PROTOCOL: callback=my.Callback, max_depth=[5, 10], refit=True")
    assert "NOT THE PUBLISHED PROTOCOL" not in next(p for p in paths if p.name == "main_linear.md").read_text()
    # the caption cannot say which cells: the off-protocol cell itself carries the flag, its neighbours do not
    flags = table.set_index(["regime", "model"])["flags"]
    assert flags[("mlp", "A")] == "d" and flags[("mlp", "B")] == "" and flags[("linear", "A")] == ""
    row = next(line for line in mlp_md.splitlines() if line.startswith("| synthetic-hr"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = [c.strip() for c in mlp_md.splitlines()[2].strip("|").split("|")]
    by_model = dict(zip(header, cells, strict=True))
    assert by_model["A"].endswith("d]") and "[" not in by_model["B"]
    assert "d not the published protocol" in mlp_md
