import json

import pytest

from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.report import ReportError, build_report
from ppgbench_pl.report.compare import Scores
from ppgbench_pl.report.load import load_runs, order_models
from ppgbench_pl.results.records import job_id, write_job
from tests.report.fabricate import SEEDS, record, spread, write_cell, write_run_json

BASE = spread(10.0, 0.5)


def test_empty_or_missing_folder_is_a_one_line_error(tmp_path):
    (tmp_path / "empty" / "jobs").mkdir(parents=True)
    with pytest.raises(ReportError, match="no job records") as info:
        load_runs([tmp_path / "empty"])
    assert isinstance(info.value, PPGBenchError) and "\n" not in str(info.value)
    with pytest.raises(ReportError, match="no such run folder"):
        load_runs([tmp_path / "nowhere"])
    with pytest.raises(ReportError, match="no job records"):
        build_report([tmp_path / "empty"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_only_failed_jobs_is_an_error(tmp_path):
    rec = record("P", "synthetic-hr", "linear", 1, 0, None, None, status="failed")
    write_job(tmp_path, rec["job_id"], rec)
    with pytest.raises(ReportError, match=r"no completed jobs .* \(1 failed\)"):
        load_runs([tmp_path])


def test_partial_run_folder(tmp_path):
    run = tmp_path / "run"
    planned = [job_id(m, t, "linear", s, 0) for m in ("P", "Q") for t in ("synthetic-hr", "synthetic-age")
               for s in SEEDS]
    write_run_json(run, planned)
    write_cell(run, "P", "synthetic-hr", "linear", spread(3.0, 0.1), BASE)
    write_cell(run, "Q", "synthetic-hr", "linear", spread(4.0, 0.1)[:3], BASE[:3], seeds=SEEDS[:3])
    write_cell(run, "P", "synthetic-age", "linear", spread(9.0, 0.1)[:4], BASE[:4], seeds=SEEDS[:4])
    failed = record("Q", "synthetic-age", "linear", 1, 0, None, None, status="failed")
    write_job(run, failed["job_id"], failed)
    (run / "jobs" / "leftover.working").mkdir()  # an interrupted job is ignored
    runs = load_runs([run])
    assert len(runs.records) == 12 and len(runs.failed) == 1 and len(runs.planned) == 20
    scores = Scores(runs.records)
    assert scores.get("synthetic-hr", "linear", "Q").n_seeds == 3
    assert scores.get("synthetic-age", "linear", "Q") is None

    index = build_report([run], tmp_path / "report")
    page = index.read_text(encoding="utf-8")
    assert "12 completed jobs of 20 planned, 1 failed" in page
    assert failed["job_id"] in page
    md = (tmp_path / "report" / "tables" / "main_linear.md").read_text(encoding="utf-8")
    age = next(line for line in md.splitlines() if line.startswith("| synthetic-age"))
    assert age.split(" | ")[3] == "–"  # Q did not finish synthetic-age


def test_combining_two_run_folders(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    write_cell(first, "P", "synthetic-hr", "linear", spread(3.0, 0.1), BASE)
    write_cell(second, "Q", "synthetic-hr", "linear", spread(4.0, 0.1), BASE)
    # the same P job again (identical), a conflicting P job, and a failed retry of a P job that succeeded
    for seed in (1, 2):
        path = first / "jobs" / job_id("P", "synthetic-hr", "linear", seed, 0) / "results.json"
        rec = json.loads(path.read_text())
        if seed == 2:
            rec["results"][0]["metrics"]["mae"] = 99.0
        write_job(second, rec["job_id"], rec)
    failed = record("P", "synthetic-hr", "linear", 3, 0, None, None, status="failed")
    write_job(second, failed["job_id"], failed)

    runs = load_runs([first, second])
    assert len(runs.records) == 10 and runs.failed == []
    assert runs.models == ["P", "Q"]
    assert len(runs.conflicts) == 1 and job_id("P", "synthetic-hr", "linear", 2, 0) in runs.conflicts[0]
    scores = Scores(runs.records)
    assert scores.get("synthetic-hr", "linear", "P").mean == pytest.approx(3.0)  # first folder wins
    assert scores.get("synthetic-hr", "linear", "Q").mean == pytest.approx(4.0)
    assert runs.job_folder(runs.records[0]).parent.parent in (first, second)
    # the other order keeps the other record
    flipped = Scores(load_runs([second, first]).records)
    assert flipped.get("synthetic-hr", "linear", "P").mean > 3.0


def test_model_order_puts_controls_last():
    assert order_models({"constant", "prv_neurokit2", "zeta", "moment_small", "alpha", "prv_published"}) == [
        "alpha", "zeta", "prv_neurokit2", "prv_published", "moment_small", "constant"]
