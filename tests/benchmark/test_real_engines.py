"""The executors on real engines (``-m cluster``; deselected by default): a one-node SLURM and a Dask
scheduler with two worker processes, all on 127.0.0.1 (tests/engines.py starts them). Skips in one line
when an engine cannot be started here (not installed, not root).

Run: ``.venv/bin/python -m pytest -q -m cluster tests/benchmark/test_real_engines.py`` (about 4 minutes on
2 cores). Every test states its bound (``Bound: N s`` in its docstring; the ``bounded`` fixture fails a
test that ran longer). Every run is the tiny suite (8 jobs) and must reproduce the local reference run:
records (timing, placement and code version aside), prediction files and ``summary.csv``. Each fault ends
with its one line (a refusal, or ``lost: <job id> (<reason>); it runs again next time``) and a rerun that
completes the plan. ``PPGBENCH_CLUSTER_REQUIRED=1`` (set by .ci/run) turns "engine cannot start" from a
skip into a failure; lines starting ``[cluster]`` say which engines started and what was compared.
"""

from __future__ import annotations

import os
import re
import signal
import socket
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


def say(config: pytest.Config, line: str) -> None:
    """One ``[cluster]`` line on the terminal, whatever pytest captures (the CI log shows what ran)."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"[cluster] {line}", flush=True)


def unavailable(what: str, why: str) -> None:
    """Skip in one line; fail instead under ``PPGBENCH_CLUSTER_REQUIRED=1`` (CI must run the group)."""
    if os.environ.get("PPGBENCH_CLUSTER_REQUIRED") == "1":
        pytest.fail(f"{what} did not start and PPGBENCH_CLUSTER_REQUIRED=1: {why}", pytrace=False)
    pytest.skip(f"{what} not available: {why}")


@pytest.fixture(autouse=True)
def bounded(request):
    """Fails a test that ran past the ``Bound: N s`` its docstring states (every test states one)."""
    found = re.search(r"Bound: (\d+) s", request.function.__doc__ or "")
    assert found, f"{request.function.__name__} states no bound"
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    say(request.config, f"{request.node.name}: {took:.0f} s (bound {found.group(1)} s)")
    assert took < float(found.group(1)), f"{request.node.name} took {took:.0f} s, past its bound"


@pytest.fixture(scope="module")
def slurm(request):
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ppgbench-slurm-"))  # pytest's tmp is 0700: munged could not enter
    folder.chmod(0o755)
    start = time.monotonic()
    engine, why = start_slurm(folder)
    if engine is None:
        shutil.rmtree(folder, ignore_errors=True)
        unavailable("real SLURM", why)
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, timeout=10,
                             env={**os.environ, **engine.env}).stdout.strip()
    nodes = subprocess.run(["sinfo", "-h", "-o", "%P %D %T %N"], capture_output=True, text=True, timeout=10,
                           env={**os.environ, **engine.env}).stdout.strip()
    say(request.config, f"SLURM up in {time.monotonic() - start:.0f} s ({version}; munged, slurmctld and slurmd "
                        f"on 127.0.0.1; sinfo: {nodes}; no accounting)")
    with pytest.MonkeyPatch.context() as patch:
        for k, v in engine.env.items():
            patch.setenv(k, v)
        yield engine
    stop_slurm(engine)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def dask_engine(tmp_path_factory, request):
    start = time.monotonic()
    engine, why = start_dask(tmp_path_factory.mktemp("dask"))
    if engine is None:
        unavailable("real Dask", why)
    import distributed

    say(request.config, f"Dask up in {time.monotonic() - start:.0f} s (distributed {distributed.__version__}; "
                        f"scheduler {engine.address}, 2 worker processes, separate from this one)")
    yield engine
    engine.stop_all()


def squeue() -> dict[str, str]:
    done = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True, timeout=10)
    return dict(line.split()[:2] for line in done.stdout.splitlines() if len(line.split()) >= 2)


def same_as_reference(run_dir: Path, reference: dict, config: pytest.Config, executor: str) -> None:
    """Records, prediction files and summary.csv equal the local run's; says so in a ``[cluster]`` line."""
    want = reference["records"]
    # warnings are the process's (Lightning warns once per process; in this one about srun being installed)
    assert same_results(records(run_dir), want, ignore=("code_version", "warnings")) == []
    files = 0
    for jid in want:
        theirs = sorted(p.name for p in (reference["run_dir"] / "jobs" / jid).iterdir() if "predictions" in p.name)
        for name in theirs:
            assert (run_dir / "jobs" / jid / name).read_bytes() == \
                (reference["run_dir"] / "jobs" / jid / name).read_bytes(), f"{jid}/{name}"
        files += len(theirs)
    import pandas as pd  # workers in other processes compute their own source digest: the code column aside

    got, ref = (pd.read_csv(d / "summary.csv") for d in (run_dir, reference["run_dir"]))
    code = [c for c in ref.columns if "code" in c or "version" in c]
    pd.testing.assert_frame_equal(got.drop(columns=code), ref.drop(columns=code))
    say(config, f"{executor} == local: {len(want)} records, {files} prediction files (bit for bit) and "
                f"summary.csv ({len(ref)} rows) equal the local run's")


def _config(tmp_path: Path, bench_root: Path) -> Path:
    return write_config(tmp_path / "config.yaml", suite_config(bench_root, tmp_path / "run"))


SLURM_ARGS = ["--executor", "submitit", "--executor.init_args.cluster", "slurm", "--executor.init_args.poll_s",
              "0.5", "--executor.init_args.check_s", "2", "--executor.init_args.progress_s", "5",
              "--executor.init_args.parameters", "{timeout_min:10,slurm_partition:debug}"]


def _unused_address() -> str:
    with socket.socket() as s:  # bound, then released: nothing listens there (the real scheduler is elsewhere)
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def _wrong_and_right(executor: str, request) -> tuple[list[str], list[str], str]:
    """(refused arguments, right arguments, what the one refusal line must start with) for ``executor``."""
    if executor == "submitit":
        request.getfixturevalue("slurm")
        right = [*SLURM_ARGS, "--executor.init_args.jobs_per_task", "2"]
        wrong = [*right[:-3], "{timeout_min:10,slurm_partition:nope}", *right[-2:]]
        return wrong, right, "executor.init_args.parameters slurm_partition=nope: sbatch --test-only refused it"
    if executor == "dask":
        address = _unused_address()
        right = ["--executor", "dask", "--executor.init_args.address", request.getfixturevalue("dask_engine").address]
        return [*right[:-1], address], right, f"executor.init_args.address {address}: no Dask scheduler answers"
    right = ["--executor", "process", "--executor.init_args.workers", "2"]
    return [*right[:-1], "0"], right, "executor.workers must be at least 1"


@pytest.mark.parametrize("executor", ["process", "submitit", "dask"])
def test_every_executor_refuses_a_wrong_setting_then_reproduces_the_local_run(tmp_path, bench_root, reference,
                                                                             request, capsys, executor):
    """Bound: 150 s. A wrong partition / address / worker count: exit 2, one line, no file; then the right one."""
    wrong, right, message = _wrong_and_right(executor, request)
    config, start = _config(tmp_path, bench_root), time.monotonic()
    assert run(["--config", str(config), *wrong]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and message in err[0], err
    assert time.monotonic() - start < 45.0 and not (tmp_path / "run").exists()  # refused before any work
    say(request.config, f"{executor}: refused in {time.monotonic() - start:.0f} s, before any file: {err[0]}")
    assert run(["--config", str(config), *right]) == 0
    same_as_reference(tmp_path / "run", reference, request.config, executor)


def test_a_wrong_partition_is_refused_by_the_real_sbatch(slurm, tmp_path):
    """Bound: 60 s. The executor's own check against the real controller, both parameter forms."""
    with pytest.raises(ConfigError, match=r"^executor.init_args.parameters slurm_partition=nope: sbatch --test-only"):
        SubmititExecutor(cluster="slurm", parameters={"slurm_partition": "nope"}).check()
    SubmititExecutor(cluster="slurm", parameters="{slurm_partition: debug}").check()
    SubmititExecutor(cluster="slurm", parameters="{slurm_partition:debug}").check()


def _pool_workers() -> list[int]:
    """This process's ``spawn`` children (the process pool's workers; the engines' daemons are not)."""
    me = os.getpid()
    kids = Path(f"/proc/{me}/task/{me}/children").read_text().split()
    out = []
    for kid in kids:
        try:
            command = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "spawn_main" in command and "resource_tracker" not in command:
            out.append(int(kid))
    return out


def test_a_sigkilled_pool_worker_loses_only_its_job_then_rerun(tmp_path, bench_root, reference, request, capsys):
    """Bound: 150 s. kill -9 one process-pool worker after the first record: one lost line; rerun completes."""
    config = _config(tmp_path, bench_root)
    args = ["--config", str(config), "--executor", "process", "--executor.init_args.workers", "2"]
    killed: list[int] = []

    def kill() -> None:
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline and not records(tmp_path / "run"):
            time.sleep(0.05)
        workers = _pool_workers()
        if workers:
            os.kill(workers[-1], signal.SIGKILL)
            killed.append(workers[-1])

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    assert run(args) == 1
    thread.join(10)
    assert killed, "no pool worker was killed"
    lost = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lost: ")]
    assert len(lost) == 1, lost
    assert lost[0].endswith(f"(process-pool worker pid {killed[0]} killed by SIGKILL while running it); "
                            "it runs again next time"), lost
    assert len(records(tmp_path / "run")) == len(reference["records"]) - 1  # the others went on
    say(request.config, f"process: {lost[0]}")
    assert run(args) == 0
    assert "1 jobs run, 7 already done" in capsys.readouterr().out
    same_as_reference(tmp_path / "run", reference, request.config, "process after a killed worker")


def _on_squeue(predicate, bound_s: float) -> dict[str, str] | None:
    """squeue's tasks once ``predicate`` holds for them; ``None`` when it did not within ``bound_s``."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        states = squeue()
        if predicate(states):
            return states
        time.sleep(0.2)
    return None


def _kill_and_cancel(work: Path, bench_root: Path, capsys) -> tuple[list[str], list[str], list[str]]:
    """One run, one task at a time: kill -9 the running task, cancel a pending one; (args, tasks hit, lost lines)."""
    args = ["--config", str(_config(work, bench_root)), *SLURM_ARGS, "--executor.init_args.jobs_per_task", "2",
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
    return args, hit, lost


def test_a_killed_and_a_cancelled_task_are_lost_then_rerun(tmp_path, bench_root, reference, slurm, capsys,
                                                           request):
    """Bound: 400 s. One task at a time: kill -9 the running one, cancel a pending one; rerun completes.

    A task of two tiny linear jobs can finish in the moment between squeue showing it running and the kill:
    then it loses nothing, and the scenario is played again in a new folder (at most three times).
    """
    for attempt in range(3):
        work = tmp_path / f"attempt{attempt}"
        work.mkdir()
        args, hit, lost = _kill_and_cancel(work, bench_root, capsys)
        if any(f"SLURM task {hit[0]}" in line for line in lost):
            break
        say(request.config, f"submitit: task {hit[0]} ended before the kill landed; played again")
    for task in hit:  # the killed running task and the cancelled pending one: both jobs of each
        assert sum(f"SLURM task {task}" in line for line in lost) == 2, (task, lost)
    assert len(lost) == 4 and all(line.endswith("; it runs again next time") for line in lost), lost
    for line in lost:
        say(request.config, f"submitit: {line}")
    assert run(args[:-2]) == 0  # the rerun without the one-at-a-time limit
    assert "4 jobs run, 4 already done" in capsys.readouterr().out
    same_as_reference(work / "run", reference, request.config, "submitit after a killed and a cancelled task")


def test_a_stopped_controller_loses_the_pending_tasks_then_rerun(tmp_path, bench_root, reference, slurm, capsys,
                                                                 request):
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
        lost = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lost: ")]
        assert lost and all("the controller has not answered for" in line for line in lost), lost
        assert all(line.endswith("or the task may still run); it runs again next time") for line in lost)
        say(request.config, f"submitit, controller stopped: {len(lost)} lost lines after "
                            f"{time.monotonic() - start:.0f} s, e.g. {lost[0]}")
    finally:
        assert restart_slurmctld(slurm), "slurmctld did not come back within 40 s"
    subprocess.run(["scancel", "--user", "root"], timeout=10)  # what the lost lines tell the user to do
    start = time.monotonic()
    assert run(args[:-4]) == 0  # the rerun without the one-at-a-time limit
    say(request.config, f"submitit: rerun after the controller's restart took {time.monotonic() - start:.0f} s")
    same_as_reference(tmp_path / "run", reference, request.config, "submitit after the controller's restart")


def test_a_sigkilled_dask_worker_costs_nothing(tmp_path, bench_root, reference, dask_engine: Engine, capsys,
                                               request):
    """Bound: 150 s. kill -9 a worker process while it runs a job; the nanny restarts it, Dask reruns the job."""
    from dask.distributed import Client

    run_dir, killed = tmp_path / "run", []

    def kill() -> None:
        with Client(dask_engine.address, timeout=10) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any((busy := client.processing()).values()):
                time.sleep(0.02)
            pids = client.run(os.getpid)  # worker address -> its process
        holding = [address for address, keys in busy.items() if keys and address in pids]
        if holding:
            os.kill(pids[holding[0]], signal.SIGKILL)
            killed.append(pids[holding[0]])

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    assert run(["--config", str(_config(tmp_path, bench_root)), "--executor", "dask", "--executor.init_args.address",
                dask_engine.address, "--executor.init_args.poll_s", "0.2"]) == 0
    thread.join(10)
    assert killed, "no worker process was killed"
    left = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dask: worker ")]
    assert len(left) == 1 and left[0].endswith(" left; Dask runs its jobs again on another worker"), left
    say(request.config, left[0])
    same_as_reference(run_dir, reference, request.config, "dask after a killed worker")
