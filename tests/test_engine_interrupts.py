"""Interrupts say so (issue 12, item 8): SIGINT exits 130 and SIGTERM 143 within seconds, each with one
line saying how far the run got; the same command then finishes the run with the records an
uninterrupted run writes."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.benchmark.helpers import (
    HALF,
    LAUNCH,
    LINEAR,
    record_files,
    records,
    run,
    same_results,
    status,
    suite_config,
    write_config,
)

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^interrupted after (\d+) of (\d+) jobs; run the same command to resume$", re.M)


def start_and_signal(config: Path, run_dir: Path, after: int, signum: int,
                     timeout: float = 120.0) -> tuple[int, str, float]:
    """Start ``ppgbench fit``, send ``signum`` once ``after`` records exist.

    Returns (exit code, stderr, seconds from the signal to the exit).
    """
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "fit", "--config", str(config)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None and len(record_files(run_dir)) < after:
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended first: {proc.stderr.read()[-2000:]}"  # type: ignore[union-attr]
        sent = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigint_and_sigterm_stop_the_run_and_the_rerun_finishes_it(tmp_path, engine_root, pinned_source):
    run_dir = tmp_path / "run"
    # 2 regimes x 2 tasks x 2 seeds x 5 folds = 40 short jobs: long enough to be interrupted twice.
    config = suite_config(engine_root, run_dir, regimes=[LINEAR, HALF], seeds=[42, 43], folds=[0, 1, 2, 3, 4],
                          data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)

    code, err, _ = start_and_signal(path, run_dir, after=1, signum=signal.SIGINT)
    assert code == 130, err
    match = LINE.search(err)
    assert match and "Traceback" not in err, err
    done, planned = int(match.group(1)), int(match.group(2))
    assert planned == 40 and 1 <= done < planned and done == len(record_files(run_dir))
    assert status(run_dir)["completed"] == done and not status(run_dir)["complete"]

    code, err, seconds = start_and_signal(path, run_dir, after=done + 1, signum=signal.SIGTERM)
    assert code == 143, err
    assert seconds < 10, f"SIGTERM took {seconds:.1f} s to stop the run"
    match = LINE.search(err)
    assert match and int(match.group(2)) == 40 and "Traceback" not in err, err
    assert not list((run_dir / "jobs").glob("*.working"))

    assert run(["--config", str(path)], "fit") == 0
    assert status(run_dir)["complete"] and status(run_dir)["completed"] == 40
    reference = tmp_path / "reference"
    assert run(["--config", str(path), "--output_dir", str(reference)], "fit") == 0
    assert same_results(records(run_dir), records(reference)) == []


def test_sigterm_stops_a_process_pool_within_seconds(tmp_path, engine_root, pinned_source):
    from tests.benchmark.test_resume import alive, children

    run_dir = tmp_path / "run"
    pool = {"class_path": "ppgbench_pl.benchmark.executors.ProcessExecutor", "init_args": {"workers": 2}}
    config = suite_config(engine_root, run_dir, regimes=[LINEAR, HALF], seeds=[42, 43], folds=[0, 1, 2, 3, 4],
                          data={"synthetic_windows": 4}, executor=pool)
    path = write_config(tmp_path / "config.yaml", config)
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "fit", "--config", str(path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not record_files(run_dir):
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read()[-2000:]  # type: ignore[union-attr]
        workers = children(proc.pid)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 143, err
        assert time.monotonic() - sent < 10, "SIGTERM did not stop the pool within seconds"
        match = LINE.search(err)
        assert match and int(match.group(2)) == 40, err
        end = time.monotonic() + 15
        while any(map(alive, workers)) and time.monotonic() < end:
            time.sleep(0.1)
        assert not any(map(alive, workers)), "pool workers outlived the stopped run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert run(["--config", str(path), "--executor", "local"], "fit") == 0
    assert status(run_dir)["complete"] and not list((run_dir / "jobs").glob("*.working"))


def test_a_signal_masked_inside_a_job_still_stops_the_run(tmp_path, engine_root, capsys):
    swallows = {"class_path": "tests.benchmark.helpers.SwallowsSignal"}
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[swallows], tasks=["synthetic-hr"], folds=[0, 1, 2],
                          data={"synthetic_windows": 4})
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 143
    err = capsys.readouterr().err
    assert LINE.search(err) and "interrupted after 0 of 3 jobs" in err, err
    assert len(record_files(run_dir)) <= 1  # the jobs after the signal never started


def test_a_signal_between_a_records_rename_and_its_count_is_still_counted(tmp_path, engine_root, capsys,
                                                                          monkeypatch):
    """The signal lands after the first record is on disk but before the loop counted it: the line on
    stderr and status.json both say 1, from the folder, and nothing half-written stays."""
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun
    from ppgbench_pl.benchmark.run_report import Interrupted

    def signalled(self, outcome, report):
        raise Interrupted(signal.SIGINT)

    monkeypatch.setattr(BenchmarkRun, "_account", signalled)
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1, 2],
                          data={"synthetic_windows": 4})
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 130
    err = capsys.readouterr().err
    assert "interrupted after 1 of 3 jobs" in err, err
    assert len(record_files(run_dir)) == 1 and status(run_dir)["completed"] == 1
    assert not list((run_dir / "jobs").glob("*.working"))


WATCH_IMPORTS = """
import signal, sys
import importlib.abc
UNDER_HANDLER = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ("pandas", "scipy.stats") and callable(signal.getsignal(signal.SIGTERM)):
            UNDER_HANDLER.append(name)
        return None
sys.meta_path.insert(0, Watch())
import ppgbench_pl.benchmark.coordinator as coordinator
coordinator.BenchmarkRun.__init__.__defaults__ = (None, 0.0)  # rewrite the summary after every job
import atexit
atexit.register(lambda: print("under-handler:", sorted(set(UNDER_HANDLER)), file=sys.stderr))
"""


def test_the_summary_libraries_are_imported_before_signals_raise(tmp_path, engine_root, pinned_source):
    """CI stop 25: a SIGTERM inside pandas' first import (lazily, mid-run) half-initialised it, and the
    summary written after the signal failed to import it: exit 1 and a traceback instead of 143. The
    libraries the outputs need are imported before the handler that raises is installed (a summary
    rewritten after every job here, as one is every 5 s mid-run)."""
    run_dir = tmp_path / "run"
    pool = {"class_path": "ppgbench_pl.benchmark.executors.ProcessExecutor", "init_args": {"workers": 2}}
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1],
                          data={"synthetic_windows": 4}, executor=pool)
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--output_dir", str(tmp_path / "warm")], "fit") == 0  # data built here
    done = subprocess.run([sys.executable, "-c", WATCH_IMPORTS + LAUNCH.replace("; ", "\n"), "fit",
                           "--config", str(path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "under-handler: []" in done.stderr, done.stderr[-2000:]
