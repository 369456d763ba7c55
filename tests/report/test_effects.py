"""Paired effects, MDD, planners, multiplicity and the paired verdicts of the report (issue 19)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ppgbench_pl.report import build_report
from ppgbench_pl.report.effects import effects_table
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.results.inference import (
    benjamini_hochberg,
    corrected_t,
    holm,
    mdd,
    mdd_floor,
    seeds_needed,
    split_ratio,
    subjects_needed,
)
from ppgbench_pl.results.summary import summarise
from tests.report.fabricate import write_cell
from tests.report.fabricate_grid import write_grid_run

SKILLS = {"P": 0.5, "Q": 0.52, "prv_published": 1.0}


def test_corrected_t_is_the_nadeau_bengio_formula_and_plain_t_at_ratio_zero():
    d = np.random.default_rng(1).normal(0.3, 1.0, 25)
    plain = stats.ttest_1samp(d, 0.0)
    assert corrected_t(d, ratio=0.0).p == pytest.approx(plain.pvalue)
    nb = corrected_t(d, ratio=0.25)
    se = math.sqrt(1 / 25 + 0.25) * d.std(ddof=1)
    assert nb.se == pytest.approx(se)
    assert nb.p == pytest.approx(2 * stats.t.sf(abs(d.mean() / se), 24))
    assert nb.ci_high - nb.mean == pytest.approx(stats.t.ppf(0.975, 24) * se)
    assert nb.d_z == pytest.approx(d.mean() / d.std(ddof=1))
    assert math.isnan(corrected_t([1.0]).p) and corrected_t([]).n == 0


def test_holm_and_bh_match_the_textbook_and_skip_nan():
    p = [0.01, 0.04, math.nan, 0.03, 0.5]
    assert np.allclose(holm(p), [0.04, 0.09, math.nan, 0.09, 0.5], equal_nan=True)
    finite = [0.01, 0.04, 0.03, 0.5]
    expected = stats.false_discovery_control(finite)
    assert np.allclose(benjamini_hochberg(p)[[0, 1, 3, 4]], expected)


def test_mdd_and_planners_agree_and_more_seeds_stop_at_the_subject_floor():
    sd = 2.0
    assert mdd(sd, 25) == pytest.approx((stats.t.ppf(0.975, 24) + stats.t.ppf(0.8, 24)) * sd * math.sqrt(0.29))
    assert mdd(sd, 50) < mdd(sd, 25) and mdd(sd, 10_000) > mdd_floor(sd)
    target = mdd(sd, 8 * 5)
    assert seeds_needed(sd, target, folds=5) == 8
    assert seeds_needed(sd, mdd_floor(sd) * 0.99) is None  # no number of seeds gets below the floor
    n = subjects_needed(sd, mdd(sd, 25) / 2, n_subjects=30)
    assert n == 120  # half the MDD needs four times the subjects
    assert split_ratio([24, 24], [6, 6], 5) == 0.25 and split_ratio([math.nan], [math.nan], 5) == 0.25


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    run = tmp_path_factory.mktemp("grid")
    write_grid_run(run, SKILLS)
    return run


def test_effects_table_pairs_on_seed_and_fold_with_both_intervals(grid):
    table = effects_table(load_runs([grid]).records)
    assert set(table["family"]) == {"baseline", "controls", "models"}
    row = table[(table.task == "synthetic-hr") & (table.model_a == "P") & (table.model_b == "prv_published")]
    row = row.iloc[0]
    assert row.n_units == 25 and row.n_seeds == 5 and row.ratio == pytest.approx(0.25)
    assert row["diff"] < 0 and row.gain > 0 and row.d_z > 0  # lower MAE: a gain
    # the subject-level interval is wider than the seed interval (it keeps the subject-sampling noise)
    assert row.nb_ci_high - row.nb_ci_low > row.seed_ci_high - row.seed_ci_low
    assert row.verdict == "better"
    close = table[(table.task == "synthetic-hr") & (table.family == "models")].iloc[0]
    assert close.verdict == "no_detectable_difference" and close.mdd > abs(close["diff"])
    holm_family = table[(table.task == "synthetic-hr") & (table.family == "baseline")]
    assert np.allclose(holm_family.p_holm, holm(holm_family.p))


def test_summary_csv_has_the_mdd_against_the_baseline(grid):
    records = load_runs([grid]).records
    summary = summarise(records).set_index(["model", "task"])
    table = effects_table(records).set_index(["model_a", "task", "family"])
    assert summary.loc[("P", "synthetic-hr"), "mdd"] == pytest.approx(
        table.loc[("P", "synthetic-hr", "baseline"), "mdd"])
    assert math.isnan(summary.loc[("constant", "synthetic-hr"), "mdd"])


def test_failed_training_is_below_baseline_not_near_chance(tmp_path):
    base = [14.5, 14.6, 14.4, 14.5, 14.7]
    write_cell(tmp_path, "P", "synthetic-hr", "mlp", [49.5, 48.0, 51.0, 50.2, 47.9], base)
    build_report([tmp_path], tmp_path / "report")
    paired = pd.read_csv(tmp_path / "report" / "tables" / "chance_cells_paired.csv")
    assert paired.loc[0, "published_status"] == "near_chance"  # the published rule is kept as it was
    assert paired.loc[0, "paired_status"] == "below_baseline" and paired.loc[0, "below_baseline"] == "P"
    text = (tmp_path / "report" / "findings.md").read_text()
    assert "Below baseline" in text and "synthetic-hr (mlp)" in text


def test_one_seed_draws_no_cd_diagram_and_names_no_winner_without_p(tmp_path):
    for task in ("synthetic-hr", "synthetic-age"):
        for model, value in (("P", 9.0), ("Q", 9.5), ("prv_published", 10.0)):
            write_cell(tmp_path, model, task, "linear", [value], [12.0], seeds=[1])
    index = build_report([tmp_path], tmp_path / "report")
    assert not list((tmp_path / "report" / "figures").glob("cd_*"))
    assert "No Friedman test or critical-difference diagram for linear" in index.read_text()
    paired = pd.read_csv(tmp_path / "report" / "tables" / "paired.csv")
    assert set(paired["better"]) == {"undetermined"}
    effects = pd.read_csv(tmp_path / "report" / "tables" / "effects.csv")
    assert set(effects["verdict"]) == {"undetermined"}


def test_report_shows_both_counts_and_the_mdd(grid, tmp_path):
    index = build_report([grid], tmp_path / "report")
    text = (tmp_path / "report" / "findings.md").read_text()
    assert "under the published CI-overlap rule" in text and "Benjamini-Hochberg" in text
    page = index.read_text()
    assert "Paired effects" in page and "nb_ci_low" in page and "mdd" in page


def test_the_planner_says_how_many_seeds_or_subjects_would_detect_the_best_gain(tmp_path):
    from ppgbench_pl.report.verdicts import planned
    from ppgbench_pl.results.inference import mdd

    row = {"gain": 1.0, "sd_diff": 1.0, "n_units": 25, "n_seeds": 5, "ratio": 0.1, "n_subjects": 30}
    seeds, subjects = planned(row)
    assert seeds > 5 and mdd(1.0, int(seeds) * 5, 0.1) <= 1.0 < mdd(1.0, (int(seeds) - 1) * 5, 0.1)
    assert subjects == math.ceil(30 * (mdd(1.0, 25, 0.1) / 1.0) ** 2)
    assert math.isnan(planned({**row, "ratio": 0.25})[0])  # below the subject floor: no number of seeds
    assert math.isnan(planned({**row, "gain": -1.0})[1])  # nothing to detect
    # a near-chance cell: P a little better than its constant, in a noisy grid
    write_grid_run(tmp_path / "run", {"P": 2.9, "prv_published": 3.0}, tasks=(("synthetic-hr", "regression"),),
                   folds=3, regime="mlp")
    build_report([tmp_path / "run"], tmp_path / "report")
    chance = pd.read_csv(tmp_path / "report" / "tables" / "chance_cells_paired.csv")
    effects = pd.read_csv(tmp_path / "report" / "tables" / "effects.csv")
    best = effects[(effects["family"] == "baseline")].sort_values("gain").iloc[-1]
    n_base = int((effects["family"] == "baseline").sum())
    expected = planned(best, 0.05 / (n_base * len(chance)))  # at the level the finding is decided (issue 31)
    assert chance.loc[0, "mdd_adj"] > chance.loc[0, "mdd"]
    assert chance.loc[0, ["seeds_to_detect_gain", "subjects_to_detect_gain"]].tolist() == pytest.approx(
        list(expected), nan_ok=True)
