"""Kill a running benchmark with SIGKILL at random points, run it again: every job once, same results."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmark.helpers import LAUNCH, record_files, records, run, same_results, suite_config, write_config

REPO = Path(__file__).resolve().parents[2]


def children(pid: int) -> list[int]:
    """Child process ids (Linux /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def run_and_kill(config: Path, run_dir: Path, after: int, group: bool = True, timeout: float = 120.0) -> int:
    """Start the benchmark in its own process group; SIGKILL it once ``after`` records exist.

    ``group``: kill the whole group (Ctrl-C, a lost node); else only the coordinator, whose pool
    workers must then exit by themselves instead of lingering as orphans.
    """
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "benchmark", "--config", str(config)], cwd=REPO,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if len(record_files(run_dir)) >= after:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
        workers = children(proc.pid)
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        end = time.monotonic() + 15
        while any(map(alive, workers)) and time.monotonic() < end:
            time.sleep(0.1)
        assert not any(map(alive, workers)), "workers outlived the killed coordinator"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group, whatever happened
        except ProcessLookupError:
            pass
    return len(record_files(run_dir))


def snapshot(run_dir: Path) -> dict[str, tuple[int, bytes]]:
    return {p.parent.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in record_files(run_dir)}


@pytest.mark.parametrize(("executor", "kills"), [("local", 2), ("process", 1)])
def test_sigkill_then_rerun_finishes_each_job_exactly_once(tmp_path, bench_root, reference, executor, kills):
    run_dir = tmp_path / "run"
    overrides = {}
    if executor == "process":
        # Pool workers finish what is already queued for them (up to 2 x workers + 1 jobs) before they
        # notice that the coordinator is gone, so this run plans a second seed to leave work for the rerun.
        overrides = {"seeds": [42, 43], "executor": {"class_path": "ppgbench_pl.benchmark.executors.ProcessExecutor",
                                                     "init_args": {"workers": 2}}}
    config = write_config(tmp_path / "config.yaml", suite_config(bench_root, run_dir, **overrides))
    planned = len(reference["records"]) * (2 if executor == "process" else 1)
    margin = 3 if executor == "local" else 10
    rng = random.Random()
    done = 0
    before: dict[str, tuple[int, bytes]] = {}
    for _ in range(kills):
        if done >= planned - margin:
            break
        done = run_and_kill(config, run_dir, after=rng.randint(done + 1, planned - margin), group=executor == "local")
        assert 0 < done < planned
        # Nothing finished before a kill is ever redone: its record is untouched by later runs.
        assert {key: v for key, v in snapshot(run_dir).items() if key in before} == before
        before = snapshot(run_dir)
    assert run(["--config", str(config)]) == 0  # the config's executor: the rerun uses the pool too
    assert {k: v for k, v in snapshot(run_dir).items() if k in before} == before
    done_records = records(run_dir)
    assert len(done_records) == planned and all(r["status"] == "ok" for r in done_records.values())
    assert not list((run_dir / "jobs").glob("*.working"))
    # The killed runs pin the source digest as conftest.py does; pool workers compute their own.
    ignore = ("code_version",) if executor == "process" else ()
    assert same_results({k: done_records[k] for k in reference["records"]}, reference["records"], ignore) == []
