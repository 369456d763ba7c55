"""Calibration with known truth: false-positive rate and power at the MDD of the new verdicts (issue 19).

Fold scores are simulated (tests/report/simulate.py), never trained: thousands of runs in well under a
second. The corrected t (the fallback of the two-level default, and ``--subject-interval corrected-t``)
must keep its false-positive rate at or below alpha + 0.02 and reach 0.8 +- 0.1 power at the MDD it prints
where subject sampling dominates; the noise-mix suite of every interval is tests/report/test_calibration_suite.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppgbench_pl.report.two_level_rows import cluster_bootstrap
from ppgbench_pl.results.inference import corrected_t, mdd
from tests.report.simulate import (
    corrected_t_rejects,
    equicorrelated_diffs,
    published_rejects,
    subject_runs,
)

ALPHA = 0.05
NAMES = np.array([f"s{i:03d}" for i in range(30)])


def _observed_mdd(diff: np.ndarray) -> float:
    """The MDD the report would print, averaged over simulated null runs."""
    return float(np.mean([mdd(s, diff.shape[1], 0.25) for s in diff.std(axis=1, ddof=1)]))


def test_vectorised_rejection_is_the_report_s_corrected_t():
    d = equicorrelated_diffs(np.random.default_rng(3), 50, 0.4)
    assert list(corrected_t_rejects(d)) == [corrected_t(row, 0.25).p < ALPHA for row in d]


def test_corrected_t_is_exact_under_the_nadeau_bengio_correlation():
    rng = np.random.default_rng(0)
    null = equicorrelated_diffs(rng, 20_000, 0.0)
    effect = equicorrelated_diffs(rng, 20_000, _observed_mdd(null))
    assert corrected_t_rejects(null).mean() <= ALPHA + 0.02
    assert corrected_t_rejects(effect).mean() == pytest.approx(0.8, abs=0.1)


@pytest.mark.parametrize("sd_t", [0.0, 0.5])
def test_corrected_t_on_subjects_partitioned_by_every_seed(sd_t):
    rng = np.random.default_rng(1)
    null = subject_runs(rng, 4000, 0.0, sd_t=sd_t)
    d0 = (null["a"] - null["b"]).reshape(4000, -1)
    at_mdd = _observed_mdd(d0)
    effect = subject_runs(rng, 4000, at_mdd, sd_t=sd_t)
    d1 = (effect["a"] - effect["b"]).reshape(4000, -1)
    assert corrected_t_rejects(d0).mean() <= ALPHA + 0.02
    assert corrected_t_rejects(d1).mean() == pytest.approx(0.8, abs=0.1)
    # the published rule, reported beside: it ignores that the seeds share their subjects
    published = published_rejects(null["a"], null["b"]).mean()
    assert published > corrected_t_rejects(d0).mean()


def _boot(run: dict[str, np.ndarray], k: int) -> dict[str, float]:
    a = {s: (NAMES, np.stack([run["sub_a"][k, s], np.ones(30)], 1)) for s in range(5)}
    b = {s: (NAMES, np.stack([run["sub_b"][k, s], np.ones(30)], 1)) for s in range(5)}
    return cluster_bootstrap(a, b, "regression", n_boot=300, seed=k)


def test_subject_bootstrap_agrees_with_the_corrected_t():
    rng = np.random.default_rng(2)
    runs = 150
    null = subject_runs(rng, runs, 0.0, sd_t=0.0)
    d0 = (null["a"] - null["b"]).reshape(runs, -1)
    effect = subject_runs(rng, runs, _observed_mdd(d0), sd_t=0.0)
    d1 = (effect["a"] - effect["b"]).reshape(runs, -1)
    boot0 = [_boot(null, k) for k in range(runs)]
    boot1 = [_boot(effect, k) for k in range(runs)]
    b0 = np.array([b["p"] < ALPHA for b in boot0])
    b1 = np.array([b["p"] < ALPHA for b in boot1])
    assert b0.mean() <= 0.12  # a little liberal with 30 subjects, as percentile bootstraps are
    assert np.mean(b0 == corrected_t_rejects(d0)) >= 0.9 and np.mean(b1 == corrected_t_rejects(d1)) >= 0.8
    # the same point estimate (pooled losses: the mean of the fold values) and intervals of one size
    assert np.allclose([b["diff"] for b in boot1], d1.mean(axis=1))
    widths = np.array([b["ci_high"] - b["ci_low"] for b in boot1])
    nb = np.array([corrected_t(row, 0.25) for row in d1], dtype=object)
    nb_widths = np.array([t.ci_high - t.ci_low for t in nb])
    assert 0.5 < np.median(widths / nb_widths) < 1.5


def test_bootstrap_reads_a_run_s_pooled_predictions(tmp_path):
    from ppgbench_pl.report.effects import effects_table
    from ppgbench_pl.report.load import load_runs
    from ppgbench_pl.report.two_level_rows import seed_stats
    from tests.report.fabricate_grid import write_grid_run

    write_grid_run(tmp_path, {"P": 0.5, "prv_published": 1.0})
    runs = load_runs([tmp_path])
    table = effects_table(runs.records).set_index(["task", "model_a", "model_b"])
    for task, kind, classes in (("synthetic-hr", "regression", []), ("synthetic-activity", "classification", [0, 1])):
        recs = {m: [r for r in runs.records if r["task"] == task and r["model"] == m] for m in ("P", "prv_published")}
        a, b = (seed_stats(runs, recs[m], kind, classes) for m in ("P", "prv_published"))
        boot = cluster_bootstrap(a, b, kind, n_boot=300)
        nb = table.loc[(task, "P", "prv_published")]
        assert boot["n_subjects"] == 30 and np.sign(boot["diff"]) == np.sign(nb["diff"])
        assert boot["diff"] == pytest.approx(nb["diff"], rel=0.1, abs=0.02)
    const = seed_stats(runs, recs["P"], "classification", [0, 1], baseline=True)
    assert cluster_bootstrap(const, const, "classification", n_boot=50)["diff"] == 0.0
    stats = next(iter(const.values()))[1]
    from ppgbench_pl.report.two_level_rows import pooled_metric

    assert pooled_metric(np.ones((1, len(stats))), stats, "classification")[0] == pytest.approx(0.5)
