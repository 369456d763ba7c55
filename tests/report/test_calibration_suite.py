"""The noise-mix simulation suite, the calibration labels, the MDD after correction, the trust table (issue 31).

A small deterministic part of tools/statistics_tables.py's suite (about 20 s CPU): every check uses a
binomial bound sound for its replicate count (z = 3.3), and the shipped ``trust_suite.json`` must agree with a
fresh run, so the report's figures are measured, not typed in.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.report import effects as trust
from ppgbench_pl.results.inference import ALPHA, adjusted_mdd_at, family_level, mdd
from tests.report.noise_mixes import MIXES, simulate
from tests.report.trust_suite import binomial_band, scenario

REPS = 400


def _shipped(mix: str, kind: str, n: int) -> dict:
    return next(r for r in trust.suite()["scenarios"] if (r["mix"], r["kind"], r["n"]) == (mix, kind, n))


def _agrees(rate: float, shipped: float, reps: int, shipped_reps: int) -> bool:
    p = max((rate + shipped) / 2, 0.01)
    return abs(rate - shipped) <= 3.3 * math.sqrt(p * (1 - p) * (1 / reps + 1 / shipped_reps)) + 0.005


@pytest.mark.parametrize("kind,n", [("regression", 30), ("classification", 15)])
def test_suite_reproduces_the_shipped_figures_and_the_corrected_t_is_never_liberal(kind, n):
    for i, mix in enumerate(MIXES):
        got = scenario(100 + i, mix, kind, n, REPS)
        shipped = _shipped(mix, kind, n)
        assert got["mdd"] == pytest.approx(shipped["mdd"], rel=0.1)
        for method in ("two_level", "corrected_t", "seed_interval", "published_rule"):
            assert _agrees(got[method]["fpr"], shipped[method]["fpr"], REPS, trust.suite()["reps"]), (mix, method)
            # power is taken at the mean printed MDD, itself an estimate (heavy-tailed with a 4-df seed
            # term), so it moves more than a binomial count: agreement within 0.12
            assert abs(got[method]["power"] - shipped[method]["power"]) <= 0.12, (mix, method)
        # the default is in the band in every mix its label does not name (bounds sound for REPS replicates)
        if mix != "training-set-dependent fold effect":
            assert binomial_band(got["two_level"]["fpr"], REPS), mix
            assert binomial_band(got["two_level"]["power"], REPS, 0.7, 0.9), mix
        # the corrected t is valid in every mix: never above the band
        assert binomial_band(got["corrected_t"]["fpr"], REPS, low=0.0)


def test_the_null_of_the_simulator_is_exact_and_a_gain_shows():
    rng = np.random.default_rng(5)
    for kind in ("regression", "classification"):
        null = simulate(rng, 3000, "with per-fold training noise", 30, kind).diff.mean(axis=1)
        assert abs(null.mean()) < 4 * null.std() / math.sqrt(len(null))
        delta = 0.05 if kind == "classification" else 1.0
        gain = simulate(rng, 3000, "with per-fold training noise", 30, kind, delta=delta).diff.mean(axis=1)
        assert gain.mean() == pytest.approx(delta, rel=0.15)


def test_every_offered_interval_outside_the_band_is_labelled_with_the_mix():
    boot, seed, nb, tl = (trust.interval_label(m) for m in ("bootstrap", "seed_interval", "corrected_t", "two_level"))
    assert "liberal" in tl and "training-set-dependent" in tl and "conservative" not in tl
    assert "liberal" in boot and any(mix in boot for mix in MIXES)
    assert "liberal" in seed and "subject x model" in seed
    assert "conservative" in nb and any(mix in nb for mix in MIXES)
    for method in ("bootstrap", "seed_interval", "corrected_t", "two_level"):
        rates = [r[method]["fpr"] for r in trust.suite()["scenarios"] if method in r]
        outside = min(rates) < trust.FPR_BAND[0] or max(rates) > trust.FPR_BAND[1]
        assert outside == ("in band" not in trust.interval_label(method))


def test_mdd_after_correction_is_that_of_the_stricter_level():
    base = mdd(1.0, 25, 0.25)
    assert adjusted_mdd_at(base, 25, ALPHA) == pytest.approx(base)
    assert adjusted_mdd_at(base, 25, family_level(ALPHA, 68)) > 1.5 * base
    assert family_level(ALPHA, 4) == ALPHA / 4 and math.isnan(adjusted_mdd_at(math.nan, 25, 0.01))


def test_summary_effects_and_compare_carry_the_corrected_mdd_and_labels(tmp_path):
    import ppgbench_pl as pb
    from ppgbench_pl.report.effects import effects_table
    from ppgbench_pl.report.load import load_runs
    from ppgbench_pl.report.two_level_rows import subject_effects
    from ppgbench_pl.results.summary import summarise
    from tests.report.fabricate_grid import write_grid_run

    write_grid_run(tmp_path / "a", {"P": 0.5, "prv_published": 1.0}, rng_seed=1)
    write_grid_run(tmp_path / "b", {"P": 1.6}, rng_seed=2)
    records = load_runs([tmp_path / "a"]).records
    summary = summarise(records)
    rows = summary[summary["mdd"].notna()]
    assert len(rows) >= 2 and (rows["mdd_adj"] > rows["mdd"]).all()
    table = effects_table(records)
    assert (table["mdd_adj"] >= table["mdd"] - 1e-12).all() and table["calibration"].str.contains("corrected t").all()
    assert table["spread_ratio"].notna().all()
    runs = load_runs([tmp_path / "a"])
    tl = subject_effects(table, runs, "two-level").set_index(["task", "model_a", "model_b"])
    assert tl.loc[("synthetic-activity", "P", "constant"), "interval"] == "two-level"
    assert tl.loc[("synthetic-hr", "P", "prv_published"), "interval"] == "two-level"
    assert tl.loc[("synthetic-hr", "P", "constant"), "interval"] == "two-level"  # the constant's MAE rebuilt
    two = tl[tl["interval"] == "two-level"]
    assert (two["tl_ci_low"] < two["diff"]).all() and (two["diff"] < two["tl_ci_high"]).all()
    assert (two["mdd_adj"] >= two["mdd"] - 1e-12).all() and two["calibration"].str.startswith("two-level").all()
    base = two[two["family"] == "baseline"]  # two comparisons in the family: alpha / 2
    assert len(base) and (base["mdd_adj"] > base["mdd"]).all()
    result = pb.compare(tmp_path / "a", tmp_path / "b", "P", output_dir=tmp_path / "out")
    assert (result.table["mdd_adj"] > result.table["mdd"]).all() and "after the correction" in result.summary
    assert set(result.table["interval"]) == {"two-level"} and "two-level" in result.summary
    assert result.meta.empty  # one dataset: no meta-analysis
    tex = (tmp_path / "out" / "compare.tex").read_text()
    assert "\\begin{tabular}" in tex and "A better" in tex and "lower is better" in tex
    assert str(tmp_path) not in tex and "a:P vs b:P" in tex  # runs named by folder, no local path
    assert "balanced\\_accuracy" in tex and "balanced_accuracy" not in tex  # user strings escaped


def test_the_constant_baseline_mae_is_rebuilt_from_the_pooled_labels(tmp_path):
    from ppgbench_pl.report.load import load_runs
    from ppgbench_pl.report.two_level_rows import seed_stats
    from tests.report.fabricate_grid import write_grid_run

    write_grid_run(tmp_path, {"P": 0.5}, tasks=(("synthetic-hr", "regression"),), rng_seed=4)
    runs = load_runs([tmp_path])
    recs = [r for r in runs.records if r["model"] == "P"]
    const = seed_stats(runs, recs, "regression", baseline=True)
    assert sorted(const) == sorted({r["seed"] for r in recs})
    for rec in recs:
        names, stats = const[rec["seed"]]
        rows = np.isin(names, np.asarray(rec["test_groups"]).astype(str))
        assert stats[rows, 0].sum() / stats[rows, 1].sum() == pytest.approx(rec["baseline"]["mae"])
    for rec in recs:
        rec.pop("train_groups")
    assert seed_stats(runs, recs, "regression", baseline=True) == {}  # no training subjects: not rebuilt


def test_paper_table_words_units_and_precision():
    from ppgbench_pl.report.compare_runs import decimals_of, paper_table

    assert decimals_of(0.16) == 2 and decimals_of(2.3) == 1 and decimals_of(31.0) == 0
    row = {"regime": "linear", "task": "dalia-hr", "metric": "mae", "mean_a": 10.123456, "mean_b": 9.9, "diff": 0.223456,
           "nb_ci_low": 0.1, "nb_ci_high": 0.34, "outcome": "loss", "p_bh": 0.01, "mdd": 0.2, "mdd_adj": 0.3}
    out = paper_table(pd.DataFrame([row])).iloc[0]
    assert out["metric"] == "mae (bpm)" and out["direction"] == "lower is better"
    assert out["mean A"] == "10.12" and out["A - B [95% CI]"] == "0.22 [0.10, 0.34]" and out["verdict"] == "A worse"


def test_report_has_the_trust_table_with_the_closest_mix_marked(tmp_path):
    from ppgbench_pl.report.build import build_report
    from tests.report.fabricate_grid import write_grid_run

    write_grid_run(tmp_path / "run", {"P": 0.5, "prv_published": 1.0}, rng_seed=1)
    index = build_report([tmp_path / "run"], tmp_path / "report")
    page = index.read_text()
    assert "How far the verdicts can be trusted" in page and "closest mix to this run:" in page
    frame = pd.read_csv(tmp_path / "report" / "tables" / "trust.csv")
    assert "published CI-overlap rule" in set(frame["verdict"]) and frame["fpr_closest_mix"].notna().all()


def test_two_level_test_is_the_suite_s_vectorised_one():
    from ppgbench_pl.results.two_level import subject_scores, two_level_test
    from tests.report.trust_suite import two_level_rejects

    for kind in ("regression", "classification"):
        cell = simulate(np.random.default_rng(9), 30, "with per-seed fit noise", 15, kind)
        reject, mdds = two_level_rejects(cell)
        for r in range(30):
            sub = np.stack([subject_scores(cell.stats_a[r, s], kind) - subject_scores(cell.stats_b[r, s], kind)
                            for s in range(5)])
            seed_means = (cell.a[r] - cell.b[r]).mean(axis=1)
            test = two_level_test(float(cell.diff[r].mean()), float(seed_means.var(ddof=1) / 5), sub)
            assert (test.p < ALPHA) == reject[r] and test.mdd() == pytest.approx(mdds[r])


def test_two_level_planners_at_the_corrected_level():
    from ppgbench_pl.results.two_level import satterthwaite, seeds_for, subjects_for, two_level_mdd

    subject, seed = 0.01, 0.04  # var terms with 5 seeds, 30 subjects
    gain = 0.5
    s = seeds_for(subject, seed, 5, 30, gain, ALPHA)
    assert s is not None and s > 2
    at = two_level_mdd(subject, seed * 5 / s, float(satterthwaite(subject, seed * 5 / s, 29, s)), ALPHA)
    before = seed * 5 / (s - 1)
    assert at <= gain < two_level_mdd(subject, before, float(satterthwaite(subject, before, 29, s - 1)), ALPHA)
    assert seeds_for(subject, seed, 5, 30, gain, ALPHA / 68) > s  # a stricter level needs more seeds
    assert seeds_for(0.2, seed, 5, 30, gain) is None  # the subject term is a floor more seeds cannot pass
    n = subjects_for(0.2, 0.001, 5, 30, gain)
    assert n is not None and n > 30 and subjects_for(0.2, 0.2, 5, 30, gain) is None  # the seed term stays


def test_spread_ratio_tells_subject_noise_from_training_noise():
    rng = np.random.default_rng(3)
    seeds = np.repeat(np.arange(5), 5)
    subject = simulate(rng, 200, "subject x model only", 30).diff
    training = simulate(rng, 200, "no subject x model effect", 30).diff
    low = np.median([trust.spread_ratio(d, seeds) for d in subject])
    high = np.median([trust.spread_ratio(d, seeds) for d in training])
    assert low < 0.3 < 0.6 < high and math.isnan(trust.spread_ratio([1.0, 2.0], [0, 0]))
