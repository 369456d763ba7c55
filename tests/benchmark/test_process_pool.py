"""The process executor's pool: a worker killed with SIGKILL loses only the job it held.

The workers run light stand-in jobs (tests/benchmark/cluster_jobs.py), so each test is bounded by a few
seconds of ``spawn`` start-up; the kill is real (``kill -9`` of the worker process mid-job).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ppgbench_pl.benchmark.worker import JobLost, JobOutcome, run_pool
from tests.benchmark.cluster_jobs import pool_job, spec


def _pid(path: Path, bound_s: float = 30.0) -> int:
    deadline = time.monotonic() + bound_s
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.parametrize("method", ["spawn", "fork"])  # the process executor's workers, the local executor's
def test_a_killed_worker_costs_only_its_job_and_the_rerun_completes(tmp_path, method):
    """Bound: 60 s. kill -9 the worker holding 'hold'; the five others finish; a rerun of 'hold' completes."""
    killed: list[int] = []

    def kill() -> None:
        killed.append(_pid(tmp_path / "hold.pid"))
        os.kill(killed[0], signal.SIGKILL)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    start = time.monotonic()
    specs = [spec(tmp_path, j) for j in ("hold", *"abcde")]
    got = {s.job_id: r for s, r in run_pool(pool_job, specs, 2, None, None, start=method)}
    assert time.monotonic() - start < 60.0
    killer.join(1.0)
    lost = got.pop("hold")
    assert isinstance(lost, JobLost), lost
    assert str(lost) == f"process-pool worker pid {killed[0]} killed by SIGKILL while running it"
    assert all(isinstance(r, JobOutcome) and r.status == "ok" for r in got.values()), got
    (tmp_path / "release").touch()
    rerun = list(run_pool(pool_job, [spec(tmp_path, "hold")], 2, None, None, start=method))
    assert [(s.job_id, getattr(r, "status", r)) for s, r in rerun] == [("hold", "ok")]


def test_closing_the_stream_stops_the_workers(tmp_path):
    """Bound: 40 s. An interrupt closes the stream: the worker still holding a job is gone within seconds."""
    stream = run_pool(pool_job, [spec(tmp_path, j) for j in ("hold", "a")], 2, None, None)
    first, _ = next(stream)
    assert first.job_id == "a"
    holder = _pid(tmp_path / "hold.pid")
    stream.close()
    deadline = time.monotonic() + 10.0
    while _alive(holder):
        assert time.monotonic() < deadline, "the worker outlived the closed stream"
        time.sleep(0.05)
