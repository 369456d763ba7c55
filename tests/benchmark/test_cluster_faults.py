"""Cluster faults on loopback stand-ins: refused settings before work, lost tasks and workers in one line.

SLURM: fake ``squeue``/``sacct``/``sbatch``/``srun`` scripts on PATH and submitit jobs whose state the test
controls (tests/benchmark/cluster_jobs.py). Dask: a real scheduler on 127.0.0.1 (a LocalCluster with
worker processes, or ``dask scheduler`` as its own process). Every test states its time bound.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ppgbench_pl.benchmark.clusters import SlurmWatch, flow_parameters, wait_tasks
from ppgbench_pl.benchmark.executors import DaskExecutor, SubmititExecutor
from ppgbench_pl.benchmark.worker import JobLost, JobOutcome
from ppgbench_pl.errors import ConfigError
from tests.benchmark.cluster_jobs import FakeJob, fake_slurm, pool_job, spec
from tests.benchmark.helpers import records, run, same_results, suite_config, write_config


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def slurm_bin(tmp_path, monkeypatch):
    """The fake SLURM commands first on PATH; returns their control folder."""
    folder = tmp_path / "slurm"
    monkeypatch.setenv("PATH", f"{fake_slurm(folder)}:/usr/bin:/bin")
    return folder


# -- refuse before work (each well under 5 s) -------------------------------------------------------------
def test_parameters_accept_both_yaml_flow_forms():
    assert flow_parameters("{timeout_min:10,slurm_partition:debug}") == {"timeout_min": 10, "slurm_partition": "debug"}
    assert flow_parameters({"timeout_min": 10, "slurm_partition": "debug"}) == {"timeout_min": 10,
                                                                                "slurm_partition": "debug"}
    assert flow_parameters("{slurm_time:1:00:00, gpus_per_node:1}") == {"slurm_time": "1:00:00", "gpus_per_node": 1}
    with pytest.raises(ConfigError, match="must be a mapping"):
        flow_parameters("[1, 2]")


def test_an_unused_dask_address_is_refused_in_one_line_naming_it():
    address = f"tcp://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        DaskExecutor(address=address, connect_timeout_s=2.0).check()
    assert time.monotonic() - start < 3.0
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"executor.init_args.address {address}: no Dask scheduler")


def test_a_wrong_dask_address_stops_the_cli_before_any_file(tmp_path, bench_root, capsys):
    """Bound: 10 s. Exit 2, one line, and no run folder (nothing embedded, no run.json)."""
    run_dir = tmp_path / "run"
    config = write_config(tmp_path / "config.yaml", suite_config(bench_root, run_dir))
    address = f"tcp://127.0.0.1:{free_port()}"
    assert run(["--config", str(config), "--executor", "dask", "--executor.init_args.address", address,
                "--executor.init_args.connect_timeout_s", "1"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and address in err[0], err
    assert not run_dir.exists()


def test_slurm_without_sbatch_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^executor.init_args.cluster slurm: sbatch and srun not installed here"):
        SubmititExecutor(cluster="slurm").check()


def test_sbatch_test_only_refusal_names_the_partition(slurm_bin, tmp_path):
    SubmititExecutor(cluster="slurm", folder=str(tmp_path / "s"), parameters="{slurm_partition:debug}").check()
    with pytest.raises(ConfigError) as caught:
        SubmititExecutor(cluster="slurm", folder=str(tmp_path / "s"), parameters={"slurm_partition": "nope"}).check()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("executor.init_args.parameters slurm_partition=nope: sbatch --test-only refused it")
    assert "invalid partition specified: nope" in message
    with pytest.raises(ConfigError, match="submitit refused them .*partitio"):
        SubmititExecutor(cluster="slurm", folder=str(tmp_path / "s"), parameters={"slurm_partitio": "x"}).check()
    assert not (tmp_path / "s").exists()  # checking writes nothing


# -- SLURM tasks that can no longer finish (each under 5 s) -------------------------------------------------
def _drain(jobs, chunks, watch, progress_s=60.0, bound_s=5.0):
    out, start = {}, time.monotonic()
    for s, result in wait_tasks(jobs, chunks, watch, poll_s=0.02, progress_s=progress_s):
        out[s.job_id] = result
        assert time.monotonic() - start < bound_s
    return out


def test_killed_and_pending_cancelled_tasks_are_lost_without_accounting(slurm_bin, tmp_path, capsys):
    (slurm_bin / "squeue.out").write_text("7_0 COMPLETED\n7_1 CANCELLED\n7_3 RUNNING\n")  # 7_2 purged (killed)
    chunks = [[spec(tmp_path, f"j{i}")] for i in range(4)]
    seen: list[str] = []

    class RunningUntilCounted(FakeJob):
        """Finishes once the progress line has counted the other three as done (not after a guessed delay)."""

        def done(self) -> bool:
            seen.append(capsys.readouterr().err)
            return "0 queued, 1 running, 3 done of 4 array tasks" in "".join(seen)

        def result(self) -> list[JobOutcome]:
            return [JobOutcome("j3", "ok")]

    jobs = [FakeJob("7_0", [JobOutcome("j0", "ok")]), FakeJob("7_1"), FakeJob("7_2"), RunningUntilCounted("7_3")]
    watch = SlurmWatch(check_s=0.05, controller_timeout_s=30.0)
    stream = wait_tasks(jobs, chunks, watch, poll_s=0.02, progress_s=0.05)
    got, start = {}, time.monotonic()
    for s, result in stream:
        got[s.job_id] = result
        assert time.monotonic() - start < 5.0
    assert got["j0"].status == "ok" and got["j3"].status == "ok"  # type: ignore[union-attr]
    assert isinstance(got["j1"], JobLost) and "SLURM task 7_1 ended CANCELLED without a result" in str(got["j1"])
    assert isinstance(got["j2"], JobLost) and "7_2 is no longer known to squeue or sacct" in str(got["j2"])
    assert jobs[1].cancelled and jobs[2].cancelled and not jobs[3].cancelled


def test_a_silent_controller_loses_every_pending_task(slurm_bin, tmp_path):
    (slurm_bin / "squeue.rc").write_text("1")
    chunks = [[spec(tmp_path, "a"), spec(tmp_path, "b")], [spec(tmp_path, "c")]]
    got = _drain([FakeJob("8_0"), FakeJob("8_1")], chunks, SlurmWatch(check_s=0.05, controller_timeout_s=0.3))
    assert set(got) == {"a", "b", "c"}
    assert all(isinstance(r, JobLost) and "the controller has not answered for" in str(r) for r in got.values())


def test_a_result_on_its_way_is_not_lost(slurm_bin, tmp_path):
    """A task squeue already calls COMPLETED whose result file lands just after: collected, not lost."""
    (slurm_bin / "squeue.out").write_text("9_0 COMPLETED\n")
    job = FakeJob("9_0")
    watch = SlurmWatch(check_s=0.05, controller_timeout_s=30.0)
    assert watch.lost(["9_0"]) == {}  # first sighting: a suspect only
    job.outcomes = [JobOutcome("x", "ok")]
    got = _drain([job], [[spec(tmp_path, "x")]], watch)
    assert got["x"].status == "ok"  # type: ignore[union-attr]


# -- Dask (each under 30 s) ------------------------------------------------------------------------------
def test_a_sigkilled_dask_worker_loses_only_its_job(tmp_path, capsys):
    import dask
    from dask.distributed import LocalCluster

    # one job per worker thread at a time, and no retry: the dead worker held exactly the job that killed it
    with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                          "distributed.scheduler.worker-saturation": 1.0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None) as cluster:
        executor = DaskExecutor(address=cluster.scheduler_address, poll_s=0.1, connect_timeout_s=10)
        executor.check()
        specs = [spec(tmp_path, jid) for jid in ("die", "a", "b", "c", "d")]
        start = time.monotonic()
        got = {s.job_id: r for s, r in executor.run(pool_job, specs, tmp_path)}
        assert time.monotonic() - start < 30.0
    assert isinstance(got.pop("die"), JobLost)
    assert all(isinstance(r, JobOutcome) and r.status == "ok" for r in got.values()), got
    assert "left; Dask runs its jobs again on another worker" in capsys.readouterr().err


def _scheduler(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                             "--port", str(port), "--no-dashboard"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("dask scheduler did not start within 20 s")


def test_no_worker_then_a_lost_scheduler_end_the_wait_in_one_line_each(tmp_path, bench_root, capsys):
    """Bound: 40 s. No worker for 1 s: every job lost (exit 1); then the scheduler SIGKILLed mid-wait."""
    port = free_port()
    proc = _scheduler(port)
    try:
        address = f"tcp://127.0.0.1:{port}"
        run_dir = tmp_path / "run"
        config = write_config(tmp_path / "config.yaml", suite_config(bench_root, run_dir, tasks=["synthetic-hr"]))
        assert run(["--config", str(config), "--executor", "dask", "--executor.init_args.address", address,
                    "--executor.init_args.worker_timeout_s", "1", "--executor.init_args.poll_s", "0.2"]) == 1
        lost = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lost: ")]
        assert len(lost) == 4 and all(line.endswith(f"(no Dask worker at {address} for 1 s); it runs again next time")
                                      for line in lost), lost
        executor = DaskExecutor(address=address, poll_s=0.1, scheduler_timeout_s=1.0, connect_timeout_s=2.0)
        threading.Timer(1.0, proc.send_signal, (signal.SIGKILL,)).start()  # while the run waits for a worker
        start = time.monotonic()
        got = list(executor.run(pool_job, [spec(tmp_path, "x")], tmp_path))
        assert time.monotonic() - start < 15.0
        assert len(got) == 1 and isinstance(got[0][1], JobLost)
        said = str(got[0][1])  # Dask cancels the future on losing the scheduler, or the watch gives up on it
        assert f"the client lost the scheduler at {address}" in said or \
            f"the Dask scheduler at {address} has not answered for" in said, said
    finally:
        proc.kill()
        proc.wait(10)
    assert run(["--config", str(config)]) == 0  # the rerun (local) does what is missing



def test_a_killed_array_task_on_a_slurm_stand_in_is_lost_in_one_line_and_rerun(slurm_bin, tmp_path, bench_root,
                                                                                 reference, capsys):
    """Bound: 120 s (each array task is a real ``python -m submitit.core._submit``; ~15 s here).

    Array task 1 is killed before it writes a result (SLURM forgets it, no accounting): its two jobs are
    reported lost, the run exits 1; the rerun runs those two only and every record matches the local run.
    """
    run_dir = tmp_path / "run"
    config = write_config(tmp_path / "config.yaml", suite_config(bench_root, run_dir, tasks=["synthetic-hr"]))
    args = ["--config", str(config), "--executor", "submitit", "--executor.init_args.cluster", "slurm",
            "--executor.init_args.jobs_per_task", "2", "--executor.init_args.poll_s", "0.1",
            "--executor.init_args.check_s", "0.2", "--executor.init_args.progress_s", "0.5",
            "--executor.init_args.parameters", "{timeout_min:10,slurm_partition:debug}"]
    (slurm_bin / "kill").write_text("1 GONE\n")
    start = time.monotonic()
    assert run(args) == 1
    assert time.monotonic() - start < 60.0
    err = capsys.readouterr().err.splitlines()
    lost = [line for line in err if line.startswith("lost: ")]
    assert len(lost) == 2 and all(line.endswith("(SLURM task 7_1 is no longer known to squeue or sacct); "
                                                "it runs again next time") for line in lost), err
    assert any(line.startswith("submitit: ") and " queued, " in line for line in err)
    assert len(records(run_dir)) == 2
    (slurm_bin / "kill").unlink()
    assert run(args) == 0
    assert "2 jobs run, 2 already done" in capsys.readouterr().out
    got = records(run_dir)
    want = {jid: r for jid, r in reference["records"].items() if "synthetic-hr" in jid}
    # code version and warnings are the process's (Lightning warns once per process, e.g. about srun on PATH)
    assert same_results(got, want, ignore=("code_version", "warnings")) == []
