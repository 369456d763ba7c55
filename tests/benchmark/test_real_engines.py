"""The executors on real engines (``-m cluster``; deselected by default): a one-node SLURM and a Dask
scheduler with two worker processes, all on 127.0.0.1 (tests/engines.py starts them). Skips in one line
when an engine cannot be started here (not installed, not root).

Run: ``.venv/bin/python -m pytest -q -m cluster tests/benchmark/test_real_engines.py`` (about 3 minutes on
2 cores; each test states its bound). Every run is the tiny suite (8 jobs) and must reproduce the local
reference run: records (timing, placement and code version aside), prediction files and ``summary.csv``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ppgbench_pl.benchmark.executors import SubmititExecutor
from ppgbench_pl.errors import ConfigError
from tests.benchmark.helpers import records, run, same_results, suite_config, write_config
from tests.engines import Engine, restart_slurmctld, start_dask, start_slurm, stop_slurm

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def slurm():
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ppgbench-slurm-"))  # pytest's tmp is 0700: munged could not enter
    folder.chmod(0o755)
    engine, why = start_slurm(folder)
    if engine is None:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"real SLURM not available: {why}")
    with pytest.MonkeyPatch.context() as patch:
        for k, v in engine.env.items():
            patch.setenv(k, v)
        yield engine
    stop_slurm(engine)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def dask_engine(tmp_path_factory):
    engine, why = start_dask(tmp_path_factory.mktemp("dask"))
    if engine is None:
        pytest.skip(f"real Dask not available: {why}")
    yield engine
    engine.stop_all()


def squeue() -> dict[str, str]:
    done = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True, timeout=10)
    return dict(line.split()[:2] for line in done.stdout.splitlines() if len(line.split()) >= 2)


def same_as_reference(run_dir: Path, reference: dict, only: str | None = None) -> None:
    """Records, prediction files and summary.csv equal the local run's."""
    want = {j: r for j, r in reference["records"].items() if only is None or only in j}
    # warnings are the process's (Lightning warns once per process; in this one about srun being installed)
    assert same_results(records(run_dir), want, ignore=("code_version", "warnings")) == []
    for jid in want:
        theirs = sorted(p.name for p in (reference["run_dir"] / "jobs" / jid).iterdir() if "predictions" in p.name)
        for name in theirs:
            assert (run_dir / "jobs" / jid / name).read_bytes() == \
                (reference["run_dir"] / "jobs" / jid / name).read_bytes(), f"{jid}/{name}"
    if only is None:  # workers in other processes compute their own source digest: the code column aside
        import pandas as pd

        got, ref = (pd.read_csv(d / "summary.csv") for d in (run_dir, reference["run_dir"]))
        code = [c for c in ref.columns if "code" in c or "version" in c]
        pd.testing.assert_frame_equal(got.drop(columns=code), ref.drop(columns=code))


def _config(tmp_path: Path, bench_root: Path) -> Path:
    return write_config(tmp_path / "config.yaml", suite_config(bench_root, tmp_path / "run"))


SLURM_ARGS = ["--executor", "submitit", "--executor.init_args.cluster", "slurm", "--executor.init_args.poll_s",
              "0.5", "--executor.init_args.check_s", "2", "--executor.init_args.progress_s", "5",
              "--executor.init_args.parameters", "{timeout_min:10,slurm_partition:debug}"]


@pytest.mark.parametrize("executor", ["process", "submitit", "dask"])
def test_every_executor_reproduces_the_local_run(tmp_path, bench_root, reference, request, executor):
    """Bound: 150 s per executor."""
    if executor == "submitit":
        request.getfixturevalue("slurm")
        args = [*SLURM_ARGS, "--executor.init_args.jobs_per_task", "2"]
    elif executor == "dask":
        args = ["--executor", "dask", "--executor.init_args.address", request.getfixturevalue("dask_engine").address]
    else:
        args = ["--executor", "process", "--executor.init_args.workers", "2"]
    start = time.monotonic()
    assert run(["--config", str(_config(tmp_path, bench_root)), *args]) == 0
    assert time.monotonic() - start < 150.0
    same_as_reference(tmp_path / "run", reference)


def test_a_wrong_partition_is_refused_by_the_real_sbatch(slurm, tmp_path):
    with pytest.raises(ConfigError, match=r"^executor.init_args.parameters slurm_partition=nope: sbatch --test-only"):
        SubmititExecutor(cluster="slurm", parameters={"slurm_partition": "nope"}).check()
    SubmititExecutor(cluster="slurm", parameters="{slurm_partition:debug}").check()


def _on_squeue(predicate, bound_s: float) -> dict[str, str] | None:
    """squeue's tasks once ``predicate`` holds for them; ``None`` when it did not within ``bound_s``."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        states = squeue()
        if predicate(states):
            return states
        time.sleep(0.2)
    return None


def test_a_killed_and_a_cancelled_task_are_lost_then_rerun(tmp_path, bench_root, reference, slurm, capsys):
    """Bound: 200 s. One task at a time: kill -9 the running one, cancel a pending one; rerun completes."""
    config = _config(tmp_path, bench_root)
    args = ["--config", str(config), *SLURM_ARGS, "--executor.init_args.jobs_per_task", "2",
            "--executor.init_args.parallelism", "1"]
    hit: list[str] = []

    def faults() -> None:
        states = _on_squeue(lambda s: any(v == "RUNNING" for v in s.values()) and len(s) >= 4, 60) or {}
        running = sorted(t for t, v in states.items() if v == "RUNNING")
        pending = sorted(t for t, v in states.items() if v == "PENDING")
        if running and pending:
            hit.extend([running[0], pending[-1]])
            subprocess.run(["scancel", "--signal=KILL", running[0]], timeout=10)
            subprocess.run(["scancel", pending[-1]], timeout=10)

    threading.Thread(target=faults, daemon=True).start()
    start = time.monotonic()
    assert run(args) == 1
    assert time.monotonic() - start < 150.0
    lost = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lost: ")]
    assert len(hit) == 2, "the faults could not be placed"
    assert any(hit[1] in line for line in lost), lost  # the cancelled pending task: both its jobs
    assert all(line.endswith("; it runs again next time") for line in lost)
    assert run(args[:-2]) == 0  # the rerun without the one-at-a-time limit
    same_as_reference(tmp_path / "run", reference)


def test_a_stopped_controller_loses_the_pending_tasks_then_rerun(tmp_path, bench_root, reference, slurm, capsys):
    """Bound: 200 s. slurmctld stopped while tasks wait: lost after controller_timeout_s; restarted, rerun."""
    assert slurm.procs["slurmctld"].poll() is None, (slurm.folder / "log" / "slurmctld.log").read_text()[-3000:]
    subprocess.run(["scancel", "--user", "root"], timeout=10)  # earlier tests' tasks: none may look running
    assert _on_squeue(lambda s: not s, 60) == {}, "earlier tasks did not leave the queue within 60 s"
    args = ["--config", str(_config(tmp_path, bench_root)), *SLURM_ARGS, "--executor.init_args.jobs_per_task",
            "2", "--executor.init_args.parallelism", "1", "--executor.init_args.controller_timeout_s", "6"]

    def stop() -> None:
        if _on_squeue(lambda s: any(v == "RUNNING" for v in s.values()), 60):
            slurm.stop("slurmctld")

    threading.Thread(target=stop, daemon=True).start()
    start = time.monotonic()
    try:
        assert run(args) == 1
        print(f"run with the controller stopped: {time.monotonic() - start:.0f} s")
        lost = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lost: ")]
        assert lost and all("the controller has not answered for" in line for line in lost), lost
        assert all(line.endswith("or the task may still run); it runs again next time") for line in lost)
    finally:
        assert restart_slurmctld(slurm), "slurmctld did not come back within 40 s"
    subprocess.run(["scancel", "--user", "root"], timeout=10)  # what the lost lines tell the user to do
    start = time.monotonic()
    assert run(args[:-4]) == 0  # the rerun without the one-at-a-time limit
    print(f"rerun after the controller's restart: {time.monotonic() - start:.0f} s")
    same_as_reference(tmp_path / "run", reference)


def _leaves(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return [leaf for kid in kids for leaf in _leaves(kid)] or ([pid] if not kids else [])


def test_a_sigkilled_dask_worker_costs_nothing(tmp_path, bench_root, reference, dask_engine: Engine):
    """Bound: 150 s. kill -9 one worker process once jobs are processing; the nanny restarts it, Dask reruns."""
    from dask.distributed import Client

    run_dir, killed = tmp_path / "run", []

    def kill() -> None:
        with Client(dask_engine.address, timeout=10) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(client.processing().values()):
                time.sleep(0.02)
        leaves = _leaves(dask_engine.procs["workers"].pid)
        if leaves:
            os.kill(leaves[0], signal.SIGKILL)
            killed.append(leaves[0])

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    assert run(["--config", str(_config(tmp_path, bench_root)), "--executor", "dask",
                "--executor.init_args.address", dask_engine.address]) == 0
    thread.join(10)
    assert killed, "no worker process was killed"
    same_as_reference(run_dir, reference)
