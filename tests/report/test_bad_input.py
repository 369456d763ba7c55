"""``ppgbench report`` on damaged or wrong input: one line naming the file, never a traceback.

A bad run folder stops the report (exit 2); a bad file inside a usable folder is skipped with one
warning line, listed on the page, and the report is still built (docs/report.md, "Damaged input").
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from ppgbench_pl.results.records import write_job
from tests.cli_helpers import run_cli
from tests.report.fabricate import record, spread, write_cell, write_showcase_run

BASE = spread(10.0, 0.5)


def _good(run):
    write_cell(run, "P", "synthetic-hr", "linear", spread(3.0, 0.1), BASE)


def _refused(args, capsys, *expected):
    code, out, err = run_cli(["report", *args], capsys)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppgbench: error: "), err
    assert "Traceback" not in err
    for text in expected:
        assert text in lines[0]
    return lines[0]


def _built_with_warnings(args, capsys):
    code, out, err = run_cli(["report", *args], capsys)
    assert code == 0, err
    assert "Traceback" not in err and out.strip().splitlines()[-1].startswith("report: ")
    return [line for line in err.splitlines() if line.strip()]


def test_a_path_that_is_not_a_run_folder(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("hello")
    _refused([str(tmp_path / "file.txt"), "-o", str(tmp_path / "r")], capsys, "file.txt", "not a run folder")
    (tmp_path / "plain").mkdir()
    _refused([str(tmp_path / "plain"), "-o", str(tmp_path / "r")], capsys, "plain",
             "not a ppgbench run folder")
    _refused([str(tmp_path / "missing"), "-o", str(tmp_path / "r")], capsys, "missing", "no such run folder")


def test_a_run_folder_without_records(tmp_path, capsys):
    (tmp_path / "run" / "jobs").mkdir(parents=True)
    _refused([str(tmp_path / "run"), "-o", str(tmp_path / "r")], capsys, "no job records")


def test_a_run_folder_whose_only_record_is_corrupt(tmp_path, capsys):
    job = tmp_path / "run" / "jobs" / "x"
    job.mkdir(parents=True)
    (job / "results.json").write_text('{"model": "P", ')
    line = _refused([str(tmp_path / "run"), "-o", str(tmp_path / "r")], capsys, "no job records")
    assert "jobs/x/results.json: is not valid JSON" in line


@pytest.mark.parametrize(("content", "reason"), [
    ("{not json", "not valid JSON"), ("[]", "not a run description"), (b"\xff\xfe", "not valid JSON"),
])
def test_a_corrupt_run_json(tmp_path, capsys, content, reason):
    run = tmp_path / "run"
    _good(run)
    path = run / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _refused([str(run), "-o", str(tmp_path / "r")], capsys, "run.json", reason)


def test_a_corrupt_record_is_skipped_with_a_warning(tmp_path, capsys):
    run = tmp_path / "run"
    _good(run)
    bad = run / "jobs" / "broken"
    bad.mkdir()
    (bad / "results.json").write_text('{"status": "ok", "model": "P"')  # cut off
    nokind = record("P", "synthetic-hr", "linear", 9, 0, 1.0, 2.0)
    del nokind["kind"]
    write_job(run, nokind["job_id"], nokind)
    warnings = _built_with_warnings([str(run), "-o", str(tmp_path / "r")], capsys)
    assert len(warnings) == 2 and all(w.startswith("ppgbench: warning: ") for w in warnings)
    assert any("jobs/broken/results.json: is not valid JSON" in w for w in warnings)
    assert any(f"{nokind['job_id']}/results.json: missing field 'kind'" in w for w in warnings)
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "2 files were skipped" in page and "jobs/broken/results.json" in page
    findings = (tmp_path / "r" / "findings.md").read_text(encoding="utf-8")
    assert "2 job records could not be read and count as not run" in findings


def test_missing_and_corrupt_prediction_files_are_noticed(tmp_path, capsys):
    run = tmp_path / "run"
    write_showcase_run(run)
    npz = sorted(run.glob("jobs/*/predictions_repeat0.npz"))
    npz[0].unlink()
    npz[1].write_bytes(b"PK\x03\x04 not really a zip")
    np.savez(npz[2], y_true=np.arange(3))  # lacks subjects and predictions
    warnings = _built_with_warnings([str(run), "-o", str(tmp_path / "r")], capsys)
    assert len(warnings) == 3
    text = "\n".join(warnings)
    assert f"{npz[0]}: predictions file missing" in text
    assert f"{npz[1]}: is not a readable .npz file" in text
    assert f"{npz[2]}: lacks array(s) subjects, y_pred" in text
    findings = (tmp_path / "r" / "findings.md").read_text(encoding="utf-8")
    assert "3 prediction files are missing or unreadable" in findings


def test_bad_output_folder_and_parameter_file(tmp_path, capsys):
    run = tmp_path / "run"
    _good(run)
    (tmp_path / "out.txt").write_text("")
    _refused([str(run), "-o", str(tmp_path / "out.txt")], capsys, "out.txt", "is a file")
    params = tmp_path / "params.json"
    params.write_text("{oops")
    _refused([str(run), "-o", str(tmp_path / "r"), "--parameters", str(params)], capsys, "params.json",
             "not a parameter-count file")
    params.write_text(json.dumps({"P": "many"}))
    _refused([str(run), "-o", str(tmp_path / "r"), "--parameters", str(params)], capsys, "params.json")


def test_the_report_command_starts_without_heavy_imports():
    code = ("import sys\n"
            "import ppgbench_pl.commands.report, ppgbench_pl.report, ppgbench_pl.report.build\n"
            "heavy = ('torch', 'lightning', 'pytorch_lightning', 'sklearn', 'wandb', 'optuna', 'matplotlib',"
            " 'scipy', 'transformers')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"
