"""--subject-interval bootstrap (report and compare) and Stouffer's meta-analysis across datasets (issue 19)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import ndtr, ndtri

from ppgbench_pl.cli import main
from ppgbench_pl.report import build_report
from ppgbench_pl.report.compare_runs import compare, meta_table
from ppgbench_pl.report.load import ReportError, load_runs
from ppgbench_pl.report.two_level_rows import cluster_bootstrap, seed_stats
from ppgbench_pl.results.inference import benjamini_hochberg, holm, one_sided_p, stouffer
from tests.report.fabricate_grid import write_grid_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("interval")
    write_grid_run(root / "a", {"P": 0.6, "prv_published": 1.0}, folds=3)
    write_grid_run(root / "b", {"P": 0.9, "prv_published": 1.0}, folds=3)
    for interval in ("corrected-t", "bootstrap"):
        build_report([root / "a"], root / f"report_{interval}", subject_interval=interval)
    return root


def _effects(root, interval):
    return pd.read_csv(root / f"report_{interval}" / "tables" / "effects.csv", keep_default_na=False,
                       na_values=[""])


def test_the_bootstrap_switch_replaces_the_subject_level_p_where_it_can_be_built(runs):
    boot, plain = _effects(runs, "bootstrap"), _effects(runs, "corrected-t")
    assert "interval" not in plain.columns  # the default table is as before
    key = ["regime", "task", "family", "model_a", "model_b"]
    assert boot[key].equals(plain[key]) and np.allclose(boot["p_nb"], plain["p"])
    rows = boot.set_index(["task", "model_a", "model_b"])
    mae_vs_constant = rows.loc[("synthetic-hr", "P", "constant")]
    assert mae_vs_constant["interval"].startswith("corrected-t (no predictions of the constant baseline")
    assert mae_vs_constant["p"] == mae_vs_constant["p_nb"] and math.isnan(mae_vs_constant["p_boot"])
    assert rows.loc[("synthetic-activity", "P", "constant")]["interval"] == "bootstrap"
    # the bootstrap row is the cluster bootstrap of the two models' pooled predictions, computed here again
    loaded = load_runs([runs / "a"])
    recs = {m: [r for r in loaded.records if r["task"] == "synthetic-hr" and r["model"] == m]
            for m in ("P", "prv_published")}
    direct = cluster_bootstrap(seed_stats(loaded, recs["P"], "regression"),
                               seed_stats(loaded, recs["prv_published"], "regression"), "regression", 2000, 0)
    row = rows.loc[("synthetic-hr", "P", "prv_published")]
    assert row["interval"] == "bootstrap" and row["p"] == pytest.approx(direct["p"])
    assert (row["boot_ci_low"], row["boot_ci_high"]) == pytest.approx((direct["ci_low"], direct["ci_high"]))
    assert row["boot_subjects"] == 30
    for _, family in boot.groupby(["regime", "task", "family"]):  # Holm over the family, from the new p
        assert np.allclose(family["p_holm"], holm(family["p"]), equal_nan=True)


def test_the_published_tables_do_not_depend_on_the_switch(runs):
    for name in ("main_cells.csv", "chance_cells.csv", "control_cells.csv"):
        assert (runs / "report_bootstrap" / "tables" / name).read_text() == \
            (runs / "report_corrected-t" / "tables" / name).read_text()


def test_the_command_line_switch_and_its_refusal(runs, tmp_path, capsys):
    main(["report", str(runs / "a"), "-o", str(tmp_path / "rep"), "--subject-interval", "bootstrap"])
    assert "interval" in pd.read_csv(tmp_path / "rep" / "tables" / "effects.csv").columns
    with pytest.raises(SystemExit) as exc:
        main(["report", str(runs / "a"), "-o", str(tmp_path / "x"), "--subject-interval", "jackknife"])
    assert exc.value.code == 2 and "jackknife" in capsys.readouterr().err
    with pytest.raises(ReportError, match="--subject-interval jackknife: choose two-level \\(default\\), corrected-t"):
        build_report([runs / "a"], tmp_path / "y", subject_interval="jackknife")


def test_compare_with_the_bootstrap(runs, tmp_path, capsys):
    result = compare(runs / "a", runs / "b", "P", "P", subject_interval="bootstrap", output_dir=tmp_path)
    table = result.table.set_index("task")
    assert set(table["interval"]) == {"bootstrap"} and np.allclose(table["p"], table["p_boot"])
    assert np.allclose(table["p_bh"], benjamini_hochberg(table["p"]))
    assert "subject cluster bootstrap" in result.summary
    main(["compare", str(runs / "a"), str(runs / "b"), "--model", "P", "--subject-interval", "bootstrap"])
    out = capsys.readouterr().out.strip().splitlines()
    assert "subject cluster bootstrap" in out[-1] and not any(o.startswith("Stouffer") for o in out)  # 1 dataset


def test_stouffer_known_values():
    z, p = stouffer([0.05, 0.05])
    assert z == pytest.approx(2 * 1.6448536 / math.sqrt(2)) and p == pytest.approx(0.0100, abs=2e-5)
    rng = np.random.default_rng(3)
    pvals, weights = rng.uniform(0.001, 0.999, 7), np.sqrt(rng.integers(10, 60, 7))
    reference = stats.combine_pvalues(pvals, method="stouffer", weights=weights)
    assert stouffer(pvals, weights) == pytest.approx((reference.statistic, reference.pvalue))
    assert stouffer([0.0, 1.0])[0] == pytest.approx(0.0, abs=1e-6) and math.isnan(stouffer([math.nan])[0])
    assert list(one_sided_p([0.2, 0.2, 1.0], [1.0, -1.0, 0.0])) == [0.1, 0.9, 0.5]


def test_meta_table_combines_datasets_by_hand():
    table = pd.DataFrame({"regime": "mlp", "model_a": "P", "model_b": "Q",
                          "task": ["dsone-a", "dsone-b", "dstwo-c"], "p": [0.02, 0.04, 0.5],
                          "gain": [1.0, 2.0, -1.0], "d_z": [0.8, 0.6, -0.2], "n_subjects": [30, 30, 15]})
    (row,) = meta_table(table).itertuples()
    z_one = (-ndtri(0.01) - ndtri(0.02)) / 2  # the mean z of dataset one's two cells
    z_two = -ndtri(0.75)
    expected = (math.sqrt(30) * z_one + math.sqrt(15) * z_two) / math.sqrt(45)
    assert row.z == pytest.approx(expected) and row.p_one_sided == pytest.approx(ndtr(-expected))
    assert row.d_z == pytest.approx((math.sqrt(30) * 0.7 + math.sqrt(15) * -0.2) / (math.sqrt(30) + math.sqrt(15)))
    assert (row.n_datasets, row.n_cells, row.datasets) == (2, 3, "dsone (30);dstwo (15)")
    assert row.verdict == ("a_better" if ndtr(-expected) < 0.025 else "no_detectable_difference")


def test_compare_output_has_the_meta_analysis_only_over_two_datasets(runs, tmp_path):
    single = compare(runs / "a", runs / "b", "P", "P", output_dir=tmp_path / "one")
    assert single.meta.empty and not (tmp_path / "one" / "compare_meta.csv").exists()  # issue 32: >= 2 datasets
    tasks = (("synthetic-hr", "regression"), ("dalia-hr", "regression"))
    for name, seed in (("x", 1), ("y", 2)):
        write_grid_run(tmp_path / name, {"P": 0.5 if name == "x" else 1.2}, tasks=tasks, rng_seed=seed)
    result = compare(tmp_path / "x", tmp_path / "y", "P", "P", output_dir=tmp_path / "two")
    (row,) = result.meta.itertuples()
    z = -ndtri(one_sided_p(result.table["p"], result.table["gain"]))
    assert row.n_datasets == 2 and row.z == pytest.approx(float(np.sum(z) / np.sqrt(2)))  # equal sqrt(30) weights
    assert (tmp_path / "two" / "compare_meta.csv").is_file() and "Stouffer" in (tmp_path / "two" / "compare.md").read_text()
