"""An ``ok`` record the summary cannot use is not done: a resume names it, reruns its job and finishes;
``ppgbench export`` refuses it in one line and ``pb.load_run(...).summary`` skips it, naming the file.

Before, such a record (a field missing, or no finite value of the reported metric) was skipped as done
by the job and then refused by the summary with a bare ``MalformedRecord`` on every resume, so the run
could never finish; or, all metrics NaN, it counted as done while the summary silently dropped its fold.
Export dropped a truncated record silently (exit 0) and met a malformed one with a traceback.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.benchmark.helpers import LINEAR, record_files, run, status, suite_config, write_config
from tests.cli_helpers import run_cli


@pytest.fixture(scope="module")
def done_run(tmp_path_factory: pytest.TempPathFactory, engine_root: Path) -> tuple[Path, Path]:
    """(config, folder) of a finished tiny run: two jobs (linear, synthetic-hr, folds 0 and 1)."""
    base = tmp_path_factory.mktemp("damaged")
    config = suite_config(engine_root, base / "run", regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1],
                          data={"synthetic_windows": 4})
    path = write_config(base / "config.yaml", config)
    assert run(["--config", str(path)]) == 0
    return path, base / "run"


def _drop_seed(record: dict[str, Any]) -> None:
    del record["seed"]


def _metric_nan(record: dict[str, Any]) -> None:
    for result in record["results"]:
        result["metrics"] = {k: math.nan for k in result["metrics"]}


def _metric_null(record: dict[str, Any]) -> None:
    for result in record["results"]:
        result["metrics"][record["metric"]] = None


DAMAGE = {"missing_seed": (_drop_seed, "missing field 'seed'"),
          "all_metrics_nan": (_metric_nan, "no repeat has a finite value of its metric"),
          "reported_metric_null": (_metric_null, "no repeat has a finite value of its metric")}


def damaged_copy(done_run: tuple[Path, Path], tmp_path: Path, damage: Any) -> tuple[Path, Path]:
    """(copy of the run, its fold-0 record) with that record rewritten by ``damage``."""
    out = tmp_path / "run"
    shutil.copytree(done_run[1], out)
    path = record_files(out)[0]
    assert "fold0" in path.parent.name
    record = json.loads(path.read_text())
    damage(record)
    path.write_text(json.dumps(record))  # NaN as the JSON token Python writes and reads
    return out, path


def resume(done_run: tuple[Path, Path], out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = run_cli(["benchmark", "--config", str(done_run[0]), "--output_dir", str(out)], capsys)
    return code, err


@pytest.mark.parametrize("case", list(DAMAGE))
def test_an_ok_record_the_summary_cannot_use_is_named_rerun_and_the_run_completes(tmp_path, capsys, done_run,
                                                                                  case):
    damage, why = DAMAGE[case]
    out, path = damaged_copy(done_run, tmp_path, damage)
    code, err = resume(done_run, out, capsys)
    assert code == 0, err
    assert "Traceback" not in err and "MalformedRecord" not in err
    assert f"warning: {path}: {why}" in err and "that job runs again" in err
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and isinstance(record["seed"], int)
    assert math.isfinite(record["results"][0]["metrics"][record["metric"]])
    assert status(out)["complete"] is True and status(out)["completed"] == 2
    summary = pd.read_csv(out / "summary.csv")
    assert "synthetic-hr" in set(summary["task"]) and summary["mean"].notna().all()
    code, err = resume(done_run, out, capsys)  # and the next resume finds it done
    assert code == 0 and "warning" not in err, err


def test_a_nan_secondary_metric_does_not_make_a_record_rerun(tmp_path, capsys, done_run):
    def secondary_nan(record: dict[str, Any]) -> None:
        for result in record["results"]:
            result["metrics"] = {k: (v if k == record["metric"] else math.nan) for k, v in result["metrics"].items()}
            result["metrics"]["auroc"] = math.nan  # undefined (one class), as a classification record may hold

    out, path = damaged_copy(done_run, tmp_path, secondary_nan)
    before = path.read_text()
    code, err = resume(done_run, out, capsys)
    assert code == 0 and "warning" not in err, err
    assert path.read_text() == before  # done: not run again
    assert status(out)["complete"] is True


def _truncate(path: Path) -> None:
    path.write_text(path.read_text()[:40])


EXPORT_DAMAGE = {**DAMAGE, "truncated": (None, "is not valid JSON")}


@pytest.mark.parametrize("case", list(EXPORT_DAMAGE))
def test_export_refuses_a_damaged_record_in_one_line_naming_it(tmp_path, capsys, done_run, case):
    damage, why = EXPORT_DAMAGE[case]
    out, path = damaged_copy(done_run, tmp_path, damage or (lambda record: None))
    if damage is None:
        _truncate(path)
    target = tmp_path / "m.ppgbench.json"
    code, _, err = run_cli(["export", str(out), "--output", str(target)], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{path}: {why}" in lines[0] and "resume the run" in lines[0], err
    assert not target.exists()
    code, _, err = run_cli(["export", str(done_run[1]), "--output", str(target)], capsys)  # the undamaged run
    assert code == 0 and target.exists(), err


@pytest.mark.parametrize("summary_csv", ["missing", "garbage"])
@pytest.mark.parametrize("case", list(DAMAGE))
def test_load_run_recomputes_the_summary_without_a_damaged_record_and_names_it(tmp_path, done_run, case,
                                                                              summary_csv):
    import warnings

    import ppgbench_pl as pb

    damage, why = DAMAGE[case]
    out, path = damaged_copy(done_run, tmp_path, damage)
    if summary_csv == "missing":
        (out / "summary.csv").unlink()
    else:
        (out / "summary.csv").write_text("a,b\n1,2\n")
    res = pb.load_run(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary, jobs = res.summary, res.jobs
    warned = [str(w.message) for w in caught]
    assert f"skipped {path}: {why}" in " | ".join(warned), warned
    assert len(res.problems) == 1 + (summary_csv == "garbage") and res.problems[0].startswith(f"{path}: {why}")
    row = summary[summary["model"] != "constant"].iloc[0]
    assert (row["task"], int(row["n_folds"])) == ("synthetic-hr", 1)  # fold 1's record, fold 0's skipped
    assert list(jobs["fold"]) == [1]


def test_a_damaged_record_whose_rerun_fails_is_named_and_the_run_ends_in_one_line(tmp_path, capsys, done_run):
    """The rerun of a damaged record gives up on its lock: the run reports that job failed and names the damaged
    file, with exit 1; before, counting the old record raised a bare ``MalformedRecord`` out of the run."""
    import subprocess
    import sys

    from ppgbench_pl.benchmark.job import job_lock_path

    out, path = damaged_copy(done_run, tmp_path, _drop_seed)
    lock = job_lock_path(out, path.parent.name)
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from ppgbench_pl.locks import file_lock\n"
                               "with file_lock(sys.argv[1]):\n print('held', flush=True); time.sleep(30)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(["benchmark", "--config", str(done_run[0]), "--output_dir", str(out),
                                "--lock_timeout", "1"], capsys)
    finally:
        holder.kill()
        holder.wait()
    assert code == 1, err
    assert "Traceback" not in err and "MalformedRecord" not in err
    assert f"failed: {path.parent.name}: --lock_timeout 1" in err
    assert f"warning: {path}: missing field 'seed'; left out of the summary" in err
    assert status(out)["complete"] is False
