"""The report's search-noise section: the variance other search seeds add, and the verdicts that flip (issue 19)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ppgbench_pl.report import build_report
from ppgbench_pl.report.search_noise import seed_units, view
from ppgbench_pl.results.records import scan_records
from tests.report.fabricate_grid import write_grid_run

SKILLS = {"P": 0.7, "prv_published": 1.0}


def _add_search_seeds(run, shift: float, model: str = "P") -> None:
    """Give every ``model`` job search seeds 1 and 2 whose fold value is the published one + k * shift."""
    for path in sorted((run / "jobs").glob("*/results.json")):
        rec = json.loads(path.read_text())
        if rec["model"] != model:
            continue
        metric = rec["metric"]
        rec["results"][0]["search_seed"] = 0
        rec["search_seed_results"] = [
            {**rec["results"][0], "search_seed": k, "predictions": f"predictions_repeat0_search{k}.npz",
             "metrics": {metric: rec["results"][0]["metrics"][metric] + k * shift}} for k in (1, 2)]
        path.write_text(json.dumps(rec))


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    root = tmp_path_factory.mktemp("search_noise")
    runs = {}
    for name, shift in (("small", 0.001), ("large", 40.0), ("none", None)):
        runs[name] = root / name
        write_grid_run(runs[name], SKILLS, tasks=(("synthetic-hr", "regression"),), folds=3, regime="mlp")
        if shift is not None:
            _add_search_seeds(runs[name], shift)
    return root, runs


def test_the_variance_table_has_the_known_search_spread(grid):
    root, runs = grid
    build_report([runs["small"]], root / "small_report")
    noise = pd.read_csv(root / "small_report" / "tables" / "search_noise.csv")
    assert noise[["model", "search_seeds", "n_units"]].values.tolist() == [["P", "0;1;2", 15]]
    row = noise.iloc[0]
    # values v, v + s, v + 2s in every unit: the within-unit sd and the sd of the cell means are both s
    assert row["sd_search"] == pytest.approx(0.001) and row["sd_cell_mean"] == pytest.approx(0.001)
    assert row["cell_mean_sd_over_ci"] == pytest.approx(0.001 / row["seed_ci95"])
    assert pd.read_csv(root / "small_report" / "tables" / "search_flips.csv").empty
    findings = (root / "small_report" / "findings.md").read_text()
    assert "## Search noise" in findings and "No verdict flips under another search seed" in findings
    page = (root / "small_report" / "index.html").read_text()
    assert "Search-noise sensitivity" in page


def test_a_search_seed_that_fails_flips_the_verdicts_and_the_published_tables_stay(grid):
    root, runs = grid
    build_report([runs["large"]], root / "large_report")
    build_report([runs["none"]], root / "none_report")
    flips = pd.read_csv(root / "large_report" / "tables" / "search_flips.csv")
    # search seed 2 puts P 80 bpm worse: it no longer beats the constant or the PRV control
    mine = flips[(flips["verdict_of"] == "P vs constant") & (flips["search_seed"] == 2)]
    assert mine[["published_search", "this_search"]].values.tolist() == [["better", "below_baseline"]]
    assert {"published", "paired"} <= set(flips["rule"])
    assert "verdicts flip under another search seed" in (root / "large_report" / "findings.md").read_text()
    noise = pd.read_csv(root / "large_report" / "tables" / "search_noise.csv").iloc[0]
    assert 0.95 < noise["search_share"] <= 1.0  # the search seeds dominate the variance of the fold values
    for name in ("main_cells.csv", "chance_cells.csv", "effects.csv"):  # search seed 0 is what the tables use
        assert (root / "large_report" / "tables" / name).read_text() == \
            (root / "none_report" / "tables" / name).read_text()


def test_runs_without_search_seeds_say_so_and_write_no_table(grid):
    root, runs = grid
    build_report([runs["none"]], root / "plain_report")
    assert not (root / "plain_report" / "tables" / "search_noise.csv").exists()
    assert "## Search noise" not in (root / "plain_report" / "findings.md").read_text()
    assert "search_seeds: [0, 1, 2]" in (root / "plain_report" / "index.html").read_text()


def test_a_view_swaps_in_one_search_seed_and_leaves_other_records(grid):
    _, runs = grid
    records = scan_records(runs["large"]).records
    swapped = view(records, 1)
    for before, after in zip(records, swapped, strict=True):
        if before["model"] == "P":
            assert after["results"][0]["search_seed"] == 1
        else:
            assert after is before
    assert sorted(set(seed_units(records)["search_seed"])) == [0, 1, 2]
