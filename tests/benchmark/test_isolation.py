"""A job that raises is recorded as failed; the rest of the plan runs; the exit status says so."""

from __future__ import annotations

import json

from ppgbench_pl.benchmark.job import execute_job
from ppgbench_pl.regimes.linear import LinearRegime
from ppgbench_pl.results.records import write_job
from tests.benchmark.helpers import LINEAR, records, run, status, suite_config, write_config

FAILING = {"class_path": "tests.benchmark.helpers.FailOnTask", "init_args": {"fail_task": "synthetic-age"}}


def test_failing_jobs_are_recorded_and_the_plan_goes_on(tmp_path, bench_root, capsys):
    run_dir = tmp_path / "run"
    config = write_config(tmp_path / "c.yaml", suite_config(bench_root, run_dir, regimes=[FAILING, LINEAR]))
    assert run(["--config", str(config)]) == 1
    done = records(run_dir)
    failed = {k: r for k, r in done.items() if r["status"] == "failed"}
    assert len(done) == 8 and len(failed) == 2
    assert all(r["task"] == "synthetic-age" and r["regime"] == "linear_or_fail" for r in failed.values())
    assert all("deliberate failure on synthetic-age" in r["error"] and r["traceback"] for r in failed.values())
    out = capsys.readouterr()
    assert "6 jobs run, 0 already done, 2 failed of 8" in out.out
    assert out.err.count("deliberate failure") == 2
    folder = status(run_dir)
    assert folder["completed"] == 6 and folder["failed"] == 2 and not folder["complete"]
    assert folder["this_command"] == {"planned": 8, "completed": 6, "skipped": 0, "failed": 2}
    summary = (run_dir / "summary.csv").read_text()
    assert "linear_or_fail" in summary and "synthetic-age,linear," in summary

    # A rerun retries only the failed jobs (which fail again); the others are not touched.
    mtimes = {p: p.stat().st_mtime_ns for p in run_dir.glob("jobs/*/results.json")}
    assert run(["--config", str(config)]) == 1
    changed = {p.parent.name for p, m in mtimes.items() if p.stat().st_mtime_ns != m}
    assert changed == set(failed)
    assert "0 jobs run, 6 already done, 2 failed of 8" in capsys.readouterr().out


def test_a_job_completed_elsewhere_is_not_run_again(tmp_path):
    from tests.report.fabricate import record as fabricated

    done = fabricated("m", "synthetic-hr", "linear", 42, 0, 3.0, 5.0)  # a record the summary can use
    del done["results"][0]["predictions"]  # (names no prediction file)
    write_job(tmp_path, done["job_id"], done)

    def never() -> None:
        raise AssertionError("the context of a completed job must not be built")

    record, ran = execute_job(tmp_path, done["job_id"], never, LinearRegime())  # type: ignore[arg-type]
    assert not ran and record["status"] == "ok"


def test_a_job_whose_inputs_cannot_be_built_fails_alone(tmp_path):
    def broken() -> None:
        raise FileNotFoundError("embeddings went missing")

    record, ran = execute_job(tmp_path, "j2", broken, LinearRegime(), extra={"model": "m"})  # type: ignore[arg-type]
    assert ran and record["status"] == "failed" and "embeddings went missing" in record["error"]
    assert json.loads((tmp_path / "jobs" / "j2" / "results.json").read_text())["model"] == "m"


def test_an_interrupt_mid_write_leaves_no_half_written_job_folder(tmp_path, monkeypatch):
    import pytest

    from ppgbench_pl.results import records as records_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(records_module, "write_json_atomic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_job(tmp_path, "j1", {"job_id": "j1", "status": "ok"}, {"p.npz": {"y": [1.0]}})
    assert list((tmp_path / "jobs").iterdir()) == []


def test_unfinished_folders_are_discarded_unless_their_job_is_being_written(tmp_path):
    from ppgbench_pl.benchmark.job import discard_unfinished, job_lock_path
    from ppgbench_pl.locks import file_lock

    jobs = tmp_path / "jobs"
    for jid in ("killed", "busy", "not-ours"):
        (jobs / f"{jid}.working").mkdir(parents=True)
        (jobs / f"{jid}.working" / "predictions_repeat0.npz").write_bytes(b"partial")
    with file_lock(job_lock_path(tmp_path, "busy")):  # another process is writing this one right now
        assert discard_unfinished(tmp_path, ["killed", "busy", "absent"]) == ["killed"]
    assert sorted(p.name for p in jobs.iterdir() if p.suffix == ".working") == ["busy.working", "not-ours.working"]
