"""Missing information in the report layer: no crash, and no verdict stronger than the statistics allow.

Subject counts absent from the records (Stouffer weights), the legacy ``prv`` control name, a model with a
better mean but no p-value (near chance), a compared cell with no p-value (compare's outcome).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from scipy.special import ndtri

import ppgbench_pl as pb
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.compare_runs import meta_line, meta_table
from ppgbench_pl.report.findings import chance_cells, control_cells, headline
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.report.verdicts import paired_chance
from tests.report.fabricate import spread, write_cell
from tests.report.fabricate_grid import write_grid_run


def test_meta_table_without_subject_counts_weights_datasets_equally():
    table = pd.DataFrame({"regime": "mlp", "model_a": "P", "model_b": "Q", "task": ["dsone-a", "dstwo-c"],
                          "p": [0.02, 0.5], "gain": [1.0, -1.0], "d_z": [0.8, -0.2],
                          "n_subjects": [math.nan, 15]})
    meta = meta_table(table)
    (row,) = meta.itertuples()
    expected = (-ndtri(0.01) - ndtri(0.75)) / math.sqrt(2)  # equal-weight Stouffer of the two datasets
    assert row.z == pytest.approx(expected) and row.d_z == pytest.approx(0.3)
    assert (row.datasets, row.weights) == ("dsone (?);dstwo (15)", "equal")
    assert "equal weights: subject counts unknown" in meta_line(meta)


def test_meta_table_with_counts_says_it_weights_by_subjects():
    table = pd.DataFrame({"regime": "mlp", "model_a": "P", "model_b": "Q", "task": ["dsone-a", "dstwo-c"],
                          "p": [0.02, 0.5], "gain": [1.0, -1.0], "d_z": [0.8, -0.2], "n_subjects": [30, 15]})
    meta = meta_table(table)
    assert list(meta["weights"]) == ["sqrt_subjects"] and "weights sqrt(subjects)" in meta_line(meta)


def _drop_subject_counts(run):
    for path in run.rglob("results.json"):
        rec = json.loads(path.read_text())
        for key in ("train_groups", "test_groups"):
            rec.pop(key, None)
        path.write_text(json.dumps(rec))


def test_compare_runs_without_subject_counts(tmp_path):
    tasks = (("synthetic-hr", "regression"), ("dalia-hr", "regression"))  # two datasets: a meta-analysis
    for name, skill in (("a", 0.6), ("b", 0.9)):
        write_grid_run(tmp_path / name, {"P": skill, "prv_published": 1.0}, tasks=tasks, folds=3)
        _drop_subject_counts(tmp_path / name)
    result = pb.compare(tmp_path / "a", tmp_path / "b", "P", output_dir=tmp_path / "out")
    assert result.table["n_subjects"].isna().all()
    (row,) = result.meta.itertuples()
    assert row.weights == "equal" and row.datasets.endswith("(?)") and math.isfinite(row.z)
    assert "(?)" in (tmp_path / "out" / "compare_meta.csv").read_text()


@pytest.fixture(scope="module")
def legacy_scores(tmp_path_factory):
    run = tmp_path_factory.mktemp("legacy")
    mae = tuple(spread(20.0, 0.1))
    write_cell(run, "P", "dalia-hr", "linear", spread(3.0, 0.1), mae)
    write_cell(run, "prv", "dalia-hr", "linear", spread(5.0, 0.1), mae)  # the NeuroKit2 PRV, old name
    write_cell(run, "moment_small", "dalia-hr", "linear", spread(4.0, 0.1), mae)
    return Scores(load_runs([run]).records)


def test_the_legacy_prv_control_counts_as_a_control(legacy_scores):
    rule = Rule("ci")
    frame = control_cells(legacy_scores, rule)
    (row,) = frame.itertuples()
    assert (row.controls, row.status, row.winners) == ("moment_small;prv", "beaten", "P")
    head = headline(chance_cells(legacy_scores, rule), frame, rule)
    assert head.controls_seen == ["moment_small", "prv"] and head.n_assessable == 1
    line = head.lines()[1]
    assert "controls run: moment_small, prv; not run: prv_published, so not required" in line
    assert "prv_neurokit2" not in line


def _effects(rows):
    cols = {"regime": "linear", "task": "dalia-hr", "family": "baseline", "model_b": "constant", "mdd": 1.0,
            "sd_diff": math.nan, "n_units": 5, "n_seeds": 5, "ratio": 0.25, "n_subjects": 15, "verdict": ""}
    return pd.DataFrame([{**cols, "model_a": m, "gain": g, "p_holm": p} for m, g, p in rows])


PUBLISHED = pd.DataFrame({"regime": ["linear"], "task": ["dalia-hr"], "metric": ["mae"], "status": ["near_chance"]})


@pytest.mark.parametrize(("rows", "status"), [
    ([("P", 0.5, math.nan), ("Q", -0.2, 0.3)], "undetermined"),  # the better model has no p-value
    ([("P", 0.5, math.nan), ("Q", 0.2, 0.6)], "undetermined"),  # one better model untested, one not significant
    ([("P", 0.5, 0.4), ("Q", -0.2, 0.3)], "near_chance"),  # every better model tested, none significant
    ([("P", -0.5, 0.4), ("Q", -0.2, math.nan)], "near_chance"),  # no better mean: p = 1
    ([("P", math.nan, math.nan), ("Q", -0.2, 0.3)], "undetermined"),  # P has no gain at all: may be better
])
def test_near_chance_needs_every_better_model_tested(rows, status):
    (row,) = paired_chance(_effects(rows), PUBLISHED).itertuples()
    assert row.paired_status == status
    if status == "undetermined" and not any(g > 0 and math.isfinite(p) for _, g, p in rows):
        assert math.isnan(row.p_cell)


def test_the_corrected_mdd_rescales_from_the_runs_alpha():
    """The effects' mdd is at the run's alpha (0.1 here); mdd_adj moves it to Holm's and BH's level 0.1 / 2."""
    from ppgbench_pl.results.inference import adjusted_mdd_at

    (row,) = paired_chance(_effects([("P", 0.5, 0.4), ("Q", -0.2, 0.3)]), PUBLISHED, alpha=0.1).itertuples()
    assert row.mdd_adj == pytest.approx(adjusted_mdd_at(1.0, 5, 0.05, alpha=0.1))
    assert row.mdd_adj > adjusted_mdd_at(1.0, 5, 0.05, alpha=0.05)  # the 0.05-based rescaling it replaced


def test_compare_calls_an_untested_cell_undetermined_not_a_tie(tmp_path):
    for name, shift in (("a", 0.0), ("b", 1.0)):
        run = tmp_path / name
        write_cell(run, "P", "synthetic-hr", "linear", [9.0 + shift], [10.0], seeds=[1])  # one unit: no p
        write_cell(run, "P", "synthetic-activity", "linear", spread(0.8 - shift / 4, 0.02), spread(0.5, 0.01))
    result = pb.compare(tmp_path / "a", tmp_path / "b", "P")
    outcome = result.table.set_index("task")["outcome"].to_dict()
    assert outcome == {"synthetic-hr": "undetermined", "synthetic-activity": "win"}
    assert "1 wins, 0 ties, 0 losses, 1 undetermined" in result.summary


def test_an_untrained_moment_is_neither_a_ppg_model_nor_the_moment_control(tmp_path):
    """``moment_small (random init)`` was tested as a PPG-specific model (it could "beat the controls");
    it is not PPG-specific, and it is not the pretrained MOMENT control either."""
    from ppgbench_pl.report.load import is_control, order_models

    run = tmp_path / "run"
    base = spread(10.0, 0.5)
    write_cell(run, "P", "synthetic-hr", "linear", spread(4.0, 0.2), base)
    write_cell(run, "prv_neurokit2", "synthetic-hr", "linear", spread(6.0, 0.2), base)
    write_cell(run, "moment_small (random init)", "synthetic-hr", "linear", spread(3.0, 0.2), base)
    scores = Scores(load_runs([run]).records)
    (row,) = control_cells(scores, Rule("ci")).to_dict("records")
    assert row["ppg_models"] == "P" and row["controls"] == "prv_neurokit2" and row["winners"] == "P"
    assert is_control("moment_small (random init)") and not is_control("P (random init)")
    assert order_models({"P", "prv_neurokit2", "moment_small (random init)", "constant"}) == [
        "P", "prv_neurokit2", "moment_small (random init)", "constant"]
