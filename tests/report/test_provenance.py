"""The report says what each table is made of: seeds x folds, code versions, backends, the protocol."""

import pandas as pd
import pytest

from ppgbench_pl.report import build_report
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.findings import chance_cells
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.report.tables import main_cells
from tests.report.fabricate import SEEDS, spread, write_cell, write_run_json

V1 = {"ppgbench": "0.1.0", "source_sha256": "a" * 64}
V2 = {"ppgbench": "0.1.0", "source_sha256": "b" * 64}
BASE = spread(10.0, 0.5)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("prov")
    hr, age = "synthetic-hr", "synthetic-age"
    write_cell(run, "P", hr, "linear", spread(3.0, 0.1), BASE, code_version=V1)
    write_cell(run, "Q", hr, "linear", spread(4.0, 0.1, 3), BASE[:3], seeds=SEEDS[:3], code_version=V1)
    # R: two seeds from another code version
    write_cell(run, "R", hr, "linear", spread(5.0, 0.1)[:3], BASE[:3], seeds=SEEDS[:3], code_version=V1)
    write_cell(run, "R", hr, "linear", spread(5.0, 0.1)[3:], BASE[3:], seeds=SEEDS[3:], code_version=V2)
    # random forest: P on cuML, Q partly on scikit-learn
    write_cell(run, "P", age, "rf", spread(8.0, 0.2), BASE, backend="cuml", code_version=V1)
    write_cell(run, "Q", age, "rf", spread(8.5, 0.2)[:2], BASE[:2], seeds=SEEDS[:2], backend="cuml",
               code_version=V1)
    write_cell(run, "Q", age, "rf", spread(8.5, 0.2)[2:], BASE[2:], seeds=SEEDS[2:], backend="sklearn",
               code_version=V1)
    write_run_json(run, [])
    return run


def test_cells_know_their_seeds_folds_versions_and_backends(run):
    scores = Scores(load_runs([run]).records)
    rule = Rule("ci")
    cells = main_cells(scores, rule, chance_cells(scores, rule)).set_index(["regime", "model"])
    assert cells.loc[("linear", "P"), "grid"] == "5×1" and cells.loc[("linear", "P"), "flags"] == ""
    assert cells.loc[("linear", "Q"), "grid"] == "3×1" and cells.loc[("linear", "Q"), "flags"] == "s"
    assert cells.loc[("linear", "R"), "flags"] == "v"
    assert cells.loc[("linear", "R"), "code_versions"] == "0.1.0+aaaaaaaaaaaa;0.1.0+bbbbbbbbbbbb"
    assert cells.loc[("rf", "Q"), "flags"] == "b" and cells.loc[("rf", "Q"), "backends"] == "cuml;sklearn"
    assert cells.loc[("rf", "P"), "backends"] == "cuml"


def test_tables_show_counts_and_flags_and_name_the_backend(run, tmp_path):
    build_report([run], tmp_path / "rep")
    md = (tmp_path / "rep" / "tables" / "main_linear.md").read_text(encoding="utf-8")
    caption = md.splitlines()[0]
    assert "Each cell: 5 seeds × 1 fold unless marked" in caption and "Backend: sklearn." in caption
    row = next(line for line in md.splitlines() if line.startswith("| synthetic-hr"))
    assert "4.00 ± 0.10 [3×1 s]" in row and "5.00 ± 0.10 [5×1 v]" in row
    assert "3.00 ± 0.10 |" in row or "3.00 ± 0.10** |" in row  # the usual grid: no marker
    rf = (tmp_path / "rep" / "tables" / "main_rf.md").read_text(encoding="utf-8")
    assert "Backend: cuml (P, Q), sklearn (not the published cuML) (Q)." in rf.splitlines()[0]
    assert "[5×1 b]" in rf
    tex = (tmp_path / "rep" / "tables" / "main_linear.tex").read_text(encoding="utf-8")
    assert r"[3$\times$1 s]" in tex
    long = pd.read_csv(tmp_path / "rep" / "tables" / "main_cells.csv")
    assert {"grid", "flags", "code_versions", "backends", "baseline", "view"} <= set(long.columns)


def test_a_run_made_by_two_code_versions_says_so(run, tmp_path):
    index = build_report([run], tmp_path / "rep")
    findings = (tmp_path / "rep" / "findings.md").read_text(encoding="utf-8")
    line = "made by 2 code versions: 0.1.0+aaaaaaaaaaaa (21 jobs), 0.1.0+bbbbbbbbbbbb (2 jobs)"
    assert line in findings and line in index.read_text(encoding="utf-8")


def test_one_code_version_says_nothing_and_the_protocol_is_linked(tmp_path):
    run = tmp_path / "run"
    write_cell(run, "P", "synthetic-hr", "linear", spread(3.0, 0.1), BASE, code_version=V1)
    index = build_report([run], tmp_path / "rep")
    page = index.read_text(encoding="utf-8")
    assert "code versions" not in (tmp_path / "rep" / "findings.md").read_text(encoding="utf-8")
    assert '<a href="protocol.md">' in page and "docs/protocol_decisions.md" in page
    protocol = (tmp_path / "rep" / "protocol.md").read_text(encoding="utf-8")
    assert protocol.startswith("# The ppgbench evaluation protocol")
    for section in ("Splits and seeds", "Regimes", "Optuna settings", "Metrics and the summary",
                    "Constant baseline"):
        assert section in protocol
    assert "PROTOCOL.md" not in page
