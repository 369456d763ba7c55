import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ppgbench_pl.results.records import is_complete, iter_records, job_id, model_id, write_job
from ppgbench_pl.results.summary import summarise, write_summary


def record(model, seed, fold, values, base=None, status="ok", task="t-hr", regime="linear"):
    return {
        "model": model, "task": task, "regime": regime, "seed": seed, "fold": fold, "metric": "mae", "status": status,
        "results": [{"metrics": {"mae": v}} for v in values], "baseline": {"mae": base} if base is not None else {},
    }


def test_ci_is_over_seed_means_with_s_minus_1_dof():
    recs = [record("m", s, f, [float(s * 10 + f)], base=100.0) for s in (42, 43, 44) for f in range(5)]
    row = summarise(recs).query("model == 'm'").iloc[0]
    seed_means = np.array([422.0, 432.0, 442.0])
    assert row["mean"] == pytest.approx(seed_means.mean())
    half = stats.t.ppf(0.975, 2) * seed_means.std(ddof=1) / np.sqrt(3)
    assert row["ci95"] == pytest.approx(half)
    assert row["ci_low"] == pytest.approx(row["mean"] - half) and row["ci_high"] == pytest.approx(row["mean"] + half)
    assert (row["n_seeds"], row["n_folds"]) == (3, 15)
    fold_row = summarise(recs, ci_unit="fold").query("model == 'm'").iloc[0]
    values = np.array([s * 10 + f for s in (42, 43, 44) for f in range(5)], float)
    assert fold_row["ci95"] == pytest.approx(stats.t.ppf(0.975, 14) * values.std(ddof=1) / np.sqrt(15))


def test_repeats_average_first_and_baseline_is_deduplicated():
    recs = [record("a", 42, 0, [1.0, 3.0], base=9.0), record("b", 42, 0, [5.0], base=9.0), record("a", 42, 1, [2.0], base=7.0)]
    table = summarise(recs)
    a = table.query("model == 'a'").iloc[0]
    assert a["mean"] == pytest.approx((2.0 + 2.0) / 2) and np.isnan(a["ci95"])  # one seed: no CI
    base = table.query("model == 'constant'").iloc[0]
    assert base["n_folds"] == 2 and base["mean"] == pytest.approx(8.0)


def test_failed_jobs_are_left_out():
    recs = [record("a", 42, 0, [1.0]), record("a", 43, 0, [5.0], status="failed")]
    assert summarise(recs).query("model == 'a'").iloc[0]["n_seeds"] == 1


def test_job_records_are_atomic_and_resumable(tmp_path):
    jid = job_id("small_cnn", "synthetic-hr", "linear", 42, 0)
    assert jid.startswith(model_id("small_cnn") + "__synthetic-hr__linear__seed42__fold0") and len(model_id("x")) == 12
    stale = tmp_path / "jobs" / f"{jid}.working"
    stale.mkdir(parents=True)
    (stale / "junk").write_text("left by a crash")
    assert not is_complete(tmp_path, jid)
    write_job(tmp_path, jid, record("a", 42, 0, [1.0]), {"predictions_repeat0.npz": {"y_true": np.arange(3)}})
    assert is_complete(tmp_path, jid) and not stale.exists()
    assert np.load(tmp_path / "jobs" / jid / "predictions_repeat0.npz")["y_true"].tolist() == [0, 1, 2]
    assert [r["model"] for r in iter_records(tmp_path)] == ["a"]
    path = write_summary(tmp_path, iter_records(tmp_path))
    assert list(pd.read_csv(path).columns[:5]) == ["model", "task", "regime", "metric", "mean"]
