import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.results import summary as summary_module
from ppgbench_pl.results.fold_entry import entry_or_id, fold_entry
from ppgbench_pl.results.records import RESULTS_FILE, job_dir, job_id, model_id, scan_records, write_job
from ppgbench_pl.results.summary import SummaryBook, summarise


def record(model, seed, fold, values, base=None, status="ok", task="t-hr", regime="linear"):
    return {
        "model": model, "task": task, "regime": regime, "seed": seed, "fold": fold, "metric": "mae",
        "status": status, "results": [{"metrics": {"mae": v}} for v in values],
        "baseline": {"mae": base} if base is not None else {},
    }


def test_ci_is_over_seed_means_with_s_minus_1_dof():
    recs = [record("m", s, f, [float(s * 10 + f)], base=100.0) for s in (42, 43, 44) for f in range(5)]
    row = summarise(recs).query("model == 'm'").iloc[0]
    seed_means = np.array([422.0, 432.0, 442.0])
    assert row["mean"] == pytest.approx(seed_means.mean())
    half = stats.t.ppf(0.975, 2) * seed_means.std(ddof=1) / np.sqrt(3)
    assert row["ci95"] == pytest.approx(half)
    assert row["ci_low"] == pytest.approx(row["mean"] - half)
    assert row["ci_high"] == pytest.approx(row["mean"] + half)
    assert (row["n_seeds"], row["n_folds"]) == (3, 15)
    fold_row = summarise(recs, ci_unit="fold").query("model == 'm'").iloc[0]
    values = np.array([s * 10 + f for s in (42, 43, 44) for f in range(5)], float)
    assert fold_row["ci95"] == pytest.approx(stats.t.ppf(0.975, 14) * values.std(ddof=1) / np.sqrt(15))


def test_repeats_average_first_and_baseline_is_deduplicated():
    recs = [record("a", 42, 0, [1.0, 3.0], base=9.0), record("b", 42, 0, [5.0], base=9.0),
            record("a", 42, 1, [2.0], base=7.0)]
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
    assert jid.startswith(model_id("small_cnn") + "__synthetic-hr__linear__seed42__fold0")
    assert len(model_id("x")) == 12
    stale = tmp_path / "jobs" / f"{jid}.working"
    stale.mkdir(parents=True)
    (stale / "junk").write_text("left by a crash")
    assert not (job_dir(tmp_path, jid) / RESULTS_FILE).exists()
    write_job(tmp_path, jid, record("a", 42, 0, [1.0]), {"predictions_repeat0.npz": {"y_true": np.arange(3)}})
    assert (job_dir(tmp_path, jid) / RESULTS_FILE).exists() and not stale.exists()
    assert np.load(tmp_path / "jobs" / jid / "predictions_repeat0.npz")["y_true"].tolist() == [0, 1, 2]
    assert [r["model"] for r in scan_records(tmp_path).records] == ["a"]
    path = SummaryBook.from_records(scan_records(tmp_path).records).write(tmp_path, force=True)
    assert list(pd.read_csv(path).columns[:5]) == ["model", "task", "regime", "metric", "mean"]


# --- the constant baseline per task view (order never matters) ---------------------------------------------


def viewed(model, seed, value, base, fs, **extra):
    rec = record(model, seed, 0, [value], base=base)
    rec.update(job_id=f"{model}-{seed}", fs=fs, **extra)
    return rec


def test_baseline_is_per_rate_and_never_depends_on_record_order():
    recs = [viewed("a", s, 3.0 + s, 0.5 + s, 64.0) for s in (1, 2, 3)]
    recs += [viewed("c", s, 2.0 + s, 0.5 + s, 64.0) for s in (1, 2, 3)]
    recs += [viewed("b", s, 4.0 + s, 0.25 + s, 125.0) for s in (1, 2, 3)]
    first = summarise(recs)
    for order in itertools.islice(itertools.permutations(range(len(recs))), 0, 400, 37):
        pd.testing.assert_frame_equal(summarise([recs[i] for i in order]), first)
    pd.testing.assert_frame_equal(summarise(recs[::-1]), first)
    rows = first.set_index("model")
    assert rows.loc["constant @64Hz", "mean"] == pytest.approx(2.5)
    assert rows.loc["constant @125Hz", "mean"] == pytest.approx(2.25)
    assert rows.loc["constant @64Hz", "view"] == "64Hz" and rows.loc["constant @125Hz", "view"] == "125Hz"
    assert rows.loc["a", "baseline"] == rows.loc["c", "baseline"] == "constant @64Hz"
    assert rows.loc["b", "baseline"] == "constant @125Hz" and rows.loc["b", "view"] == "125Hz"
    assert rows.loc["constant @64Hz", "baseline"] == "" or pd.isna(rows.loc["constant @64Hz", "baseline"])
    assert "constant" not in rows.index
    folds = SummaryBook.from_records(recs).fold_table()
    assert set(folds.loc[folds["model"] == "constant @125Hz", "value"]) == {1.25, 2.25, 3.25}


def test_one_view_is_named_constant_and_disagreeing_models_get_their_own():
    same = [viewed(m, s, 1.0, 7.0 + s, 64.0) for m in ("a", "b") for s in (1, 2)]
    table = summarise(same).set_index("model")
    assert table.loc["constant", "n_folds"] == 2 and table.loc["a", "baseline"] == "constant"
    differ = [viewed("a", s, 1.0, 7.0 + s, 64.0) for s in (1, 2)]
    differ += [viewed("b", s, 1.0, 9.0, 64.0) for s in (1, 2)]
    table = summarise(differ).set_index("model")
    assert table.loc["constant/a", "mean"] == pytest.approx(8.5) and table.loc["constant/b", "mean"] == 9.0
    assert table.loc["a", "baseline"] == "constant/a" and table.loc["b", "baseline"] == "constant/b"
    pd.testing.assert_frame_equal(summarise(differ[::-1]), summarise(differ))


def test_rates_whose_baselines_agree_on_shared_folds_share_one_baseline():
    same = [viewed("a", s, 1.0, 7.0 + s, 64.0) for s in (1, 2, 3)]
    same += [viewed("b", s, 2.0, 7.0 + s, 125.0) for s in (2, 3, 4)]
    table = summarise(same).set_index("model")
    assert table.loc["constant", "view"] == "64Hz;125Hz" and table.loc["constant", "n_folds"] == 4
    assert table.loc["a", "baseline"] == table.loc["b", "baseline"] == "constant"
    assert table.loc["a", "view"] == "64Hz" and table.loc["b", "view"] == "125Hz"
    # the same values but never seen on a shared fold: not known to be one view
    apart = [viewed("a", s, 1.0, 7.0, 64.0) for s in (1, 2)]
    apart += [viewed("b", s, 2.0, 7.0, 125.0) for s in (3, 4)]
    assert set(summarise(apart)["model"]) == {"a", "b", "constant @64Hz", "constant @125Hz"}
    # one rate of three differs: every rate keeps its own
    three = same + [viewed("c", s, 3.0, 0.5, 100.0) for s in (1, 2)]
    names = set(summarise(three)["model"])
    assert names == {"a", "b", "c", "constant @64Hz", "constant @100Hz", "constant @125Hz"}
    for order in (three[::-1], three[3:] + three[:3]):
        pd.testing.assert_frame_equal(summarise(order), summarise(three))


def test_rows_say_which_backend_and_code_version_made_them():
    v1 = {"ppgbench": "0.1.0", "source_sha256": "ab" * 32}
    v2 = {"ppgbench": "0.1.1", "source_sha256": "cd" * 32}
    recs = [viewed("a", 1, 1.0, 2.0, 64.0, backend="cuml", code_version=v1),
            viewed("a", 2, 1.0, 2.0, 64.0, backend="sklearn", code_version=v2)]
    row = summarise(recs).set_index("model").loc["a"]
    assert row["backend"] == "cuml;sklearn"
    assert row["code_version"] == "0.1.0+abababababab;0.1.1+cdcdcdcdcdcd"


def test_unknown_ci_unit_is_a_one_line_user_error():
    with pytest.raises(PPGBenchError, match="ci_unit must be 'seed' or 'fold', got 'fols'"):
        summarise([], ci_unit="fols")


# --- the incremental book -----------------------------------------------------------------------------------

def _random_records(rng, n):
    out = []
    for _ in range(n):
        model, task, regime = f"m{rng.integers(3)}", f"t{rng.integers(2)}", ("linear", "rf")[rng.integers(2)]
        seed, fold = int(rng.integers(42, 45)), int(rng.integers(3))
        values = list(rng.normal(5, 1, int(rng.integers(1, 3))))
        rec = record(model, seed, fold, values, base=float(seed + fold), task=task, regime=regime,
                     status="ok" if rng.random() > 0.1 else "failed")
        rec["job_id"] = f"{model}__{task}__{regime}__seed{seed}__fold{fold}"
        rec["fs"] = (64.0, 125.0)[int(model[1]) % 2]
        out.append(rec)
    return out


def test_book_added_one_job_at_a_time_equals_the_summary_of_everything():
    rng = np.random.default_rng(0)
    recs = _random_records(rng, 120)
    book, by_fold = SummaryBook(), SummaryBook("fold")
    latest = {}
    for i, rec in enumerate(recs):
        book.add(rec)
        by_fold.add(rec)
        latest[rec["job_id"]] = rec
        if i % 17 == 0 or i == len(recs) - 1:
            pd.testing.assert_frame_equal(book.summary(), summarise(latest.values()))
            pd.testing.assert_frame_equal(by_fold.summary(), summarise(latest.values(), "fold"))
    assert book.ok_ids == {j for j, r in latest.items() if r["status"] == "ok"}
    assert book.failed_ids == {j for j, r in latest.items() if r["status"] != "ok"}


def test_book_recomputes_only_the_groups_a_job_changed(monkeypatch):
    recs = [record("m", s, f, [1.0], base=2.0, task=f"t{t}") | {"job_id": f"t{t}-{s}-{f}"}
            for t in range(20) for s in (42, 43) for f in range(3)]
    book = SummaryBook.from_records(recs)
    book.summary()
    calls = []
    real = summary_module.summarise_group
    monkeypatch.setattr(summary_module, "summarise_group",
                        lambda entries, unit: calls.append(1) or real(entries, unit))
    book.add(record("m", 44, 0, [9.0], base=2.0, task="t3") | {"job_id": "t3-44-0"})
    table = book.summary()
    assert len(calls) == 1  # one (task, regime) group of 20 was recomputed
    assert table.query("task == 't3' and model == 'm'").iloc[0]["n_seeds"] == 3


def test_book_writes_atomically_at_most_every_few_seconds(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(summary_module.time, "monotonic", lambda: clock[0])
    book = SummaryBook(every_s=5.0)
    book.add(record("a", 42, 0, [1.0], base=2.0))
    path = book.write(tmp_path)
    assert path == tmp_path / "summary.csv" and len(pd.read_csv(path)) == 2
    book.add(record("b", 42, 0, [1.0], base=2.0))
    clock[0] += 1.0
    assert book.write(tmp_path) is None and len(pd.read_csv(path)) == 2  # throttled
    clock[0] += 5.0
    assert book.write(tmp_path) == path and len(pd.read_csv(path)) == 3
    clock[0] += 10.0
    assert book.write(tmp_path) is None  # nothing changed
    assert book.write(tmp_path, force=True) == path  # the final write always happens
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.csv"]  # no temporary file left behind
    assert (path.stat().st_mode & 0o777) == 0o666 & ~_umask()


def _umask():
    old = os.umask(0)
    os.umask(old)
    return old


def test_scan_reads_the_whole_folder_and_reports_bad_files(tmp_path):
    good = [record("a", 42, f, [1.0 + f], base=2.0) | {"job_id": job_id("a", "t-hr", "linear", 42, f)}
            for f in range(2)]
    for rec in good:
        write_job(tmp_path, rec["job_id"], rec)
    bad = {"corrupt": "{\"model\": ", "empty": "", "list": "[1, 2]",
           "no_model": json.dumps({**good[0], "model": None})}
    for name, text in bad.items():
        (tmp_path / "jobs" / name).mkdir()
        (tmp_path / "jobs" / name / "results.json").write_text(text)
    (tmp_path / "jobs" / "x.working").mkdir()
    (tmp_path / "jobs" / "x.working" / "results.json").write_text("{")  # in progress: not looked at
    scan = scan_records(tmp_path, transform=fold_entry)
    assert [e.fold for e in scan.records] == [0, 1] and len(scan.folders) == 2
    assert len(scan.problems) == 4 and all("\n" not in p for p in scan.problems)
    text = "\n".join(scan.problems)
    assert "jobs/corrupt/results.json: is not valid JSON" in text
    assert "jobs/empty/results.json: is empty" in text
    assert "jobs/list/results.json: is not a job record" in text
    assert "jobs/no_model/results.json: missing field 'model'" in text
    failed = record("a", 43, 0, [1.0], status="failed") | {"job_id": "failed-job"}
    write_job(tmp_path, "failed-job", failed)
    book, scan = SummaryBook(), scan_records(tmp_path, transform=entry_or_id)
    for item in scan.records:
        book.take(item)
    assert len(scan.problems) == 4 and len(book) == 2 and book.failed_ids == {"failed-job"}
    assert scan_records(tmp_path / "nowhere").records == []


def test_the_summary_module_imports_nothing_heavy():
    code = ("import sys, ppgbench_pl.results.summary, ppgbench_pl.results.records\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'lightning', 'sklearn', "
            "'scipy', 'matplotlib', 'wandb', 'optuna'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"
