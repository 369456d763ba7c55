"""The local executor's job processes: jobs that train networks run side by side in forked copies, the rest here.

The pool tests use light stand-in jobs (tests/benchmark/cluster_jobs.py); the end-to-end test runs one MLP
cell at ``workers: 1`` and at the default (one forked job process per usable core) and finds the same records.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from ppgbench_pl.benchmark import executors
from ppgbench_pl.benchmark.executors import LocalExecutor, fork_refusal
from ppgbench_pl.benchmark.groups import job_groups
from ppgbench_pl.benchmark.thread_policy import choose_policy, usable_cores
from ppgbench_pl.benchmark.worker import JobOutcome, JobSpec
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo import search_events
from tests.benchmark.cluster_jobs import pool_job, spec
from tests.benchmark.helpers import run, same_results, search_records, suite_config, write_config

needs_fork = pytest.mark.skipif(fork_refusal() is not None, reason="no fork here")


def _jobs(*cells: tuple[str, int, int]) -> list[NS]:
    """Pending jobs of (regime name, stack_jobs, folds) cells; ``mlp`` trains trials, the others do not."""
    out = []
    for name, stack, folds in cells:
        regime = NS(name=name, stack_jobs=stack, trains_trials=name == "mlp")
        out += [NS(model_name="m", task=NS(name="t"), regime=regime, job_id=f"{name}-{f}") for f in range(folds)]
    return out


def test_a_lone_stack_is_split_over_the_job_processes_and_other_regimes_do_not_count():
    pending = _jobs(("linear", 1, 3), ("mlp", 5, 5))
    assert job_groups(pending) == [["linear-0"], ["linear-1"], ["linear-2"], [f"mlp-{f}" for f in range(5)]]
    assert job_groups(pending, 2) == [["linear-0"], ["linear-1"], ["linear-2"], ["mlp-0", "mlp-1", "mlp-2"],
                                      ["mlp-3", "mlp-4"]]
    assert job_groups(pending, 8)[3:] == [["mlp-0"], ["mlp-1"], ["mlp-2"], ["mlp-3"], ["mlp-4"]]  # one job each
    two_cells = _jobs(("mlp", 2, 4))  # two stacks already: each process has one
    assert job_groups(two_cells, 2) == [["mlp-0", "mlp-1"], ["mlp-2", "mlp-3"]]
    assert job_groups(_jobs(("linear", 1, 2)), 4) == [["linear-0"], ["linear-1"]]


def test_workers_are_checked_and_the_default_is_the_usable_cores(monkeypatch):
    with pytest.raises(ConfigError, match="executor.workers must be at least 1, got 0"):
        LocalExecutor(workers=0)
    if fork_refusal() is None:
        assert LocalExecutor().processes_here() == usable_cores()
        assert LocalExecutor(workers=3).threads_per_job() == 1  # a forked job process starts no threads
        assert choose_policy(LocalExecutor(workers=2), 2).processes == 1  # --threads 2: every job here
    assert LocalExecutor(workers=1).processes_here() == 1 and LocalExecutor(workers=1).threads_per_job() is None
    monkeypatch.setattr(executors.sys, "platform", "darwin")  # no fork: every job in this process
    assert "not Linux" in (fork_refusal() or "")
    assert LocalExecutor().processes_here() == 1
    with pytest.raises(ConfigError, match=r"executor.workers 3: jobs cannot run in forked copies .*not Linux"):
        LocalExecutor(workers=3).processes_here()  # asked for, and impossible here: refused, not ignored
    policy = choose_policy(LocalExecutor())
    assert policy.processes == 1 and policy.side_by_side == "networks"
    assert "jobs that train networks in 1 process(es)" in policy.line()


@needs_fork
def test_jobs_that_train_networks_run_in_forked_processes_and_the_rest_here(tmp_path):
    specs = [replace(spec(tmp_path, j), side_by_side=j.startswith("net")) for j in ("lin0", "net0", "lin1", "net1")]
    got = list(LocalExecutor(workers=2).run(pool_job, specs, tmp_path))
    assert sorted(s.job_id for s, _ in got) == ["lin0", "lin1", "net0", "net1"]
    assert [s.job_id for s, _ in got][:2] == ["lin0", "lin1"]  # the jobs run here come first, in plan order
    assert all(isinstance(r, JobOutcome) and r.status == "ok" for _, r in got)
    pids = {j: int((tmp_path / f"{j}.pid").read_text()) for j in ("lin0", "lin1", "net0", "net1")}
    assert pids["lin0"] == pids["lin1"] == os.getpid()
    assert len({pids["net0"], pids["net1"], os.getpid()}) == 3  # two job processes side by side
    lone = [replace(spec(tmp_path, "net2"), side_by_side=True)]  # one job: no process is worth starting
    assert [r.status for _, r in LocalExecutor(workers=2).run(pool_job, lone, tmp_path)] == ["ok"]
    assert int((tmp_path / "net2.pid").read_text()) == os.getpid()
    threaded = [replace(spec(tmp_path, f"net{i}"), side_by_side=True, threads=2) for i in (3, 4)]  # --threads 2
    assert [r.status for _, r in LocalExecutor(workers=2).run(pool_job, threaded, tmp_path)] == ["ok", "ok"]
    assert {int((tmp_path / f"net{i}.pid").read_text()) for i in (3, 4)} == {os.getpid()}


def progress_job(job: JobSpec) -> JobOutcome:
    """Announces two search epochs from its process, as a stacked search does, then ends."""
    for done in (0, 1):
        search_events.announce(search_events.EpochEvent(7, trial_epochs=3, trials_done=done, trials_total=2))
    Path(job.run_dir, f"{job.job_id}.listeners").write_text(str(len(search_events._LISTENERS)))
    return JobOutcome(job.job_id, "ok")


@needs_fork
def test_a_job_process_forwards_its_searches_progress_to_the_coordinators_listeners(tmp_path, monkeypatch):
    heard: list[search_events.EpochEvent] = []
    monkeypatch.setattr(search_events, "_LISTENERS", [heard.append])  # this process's only listener
    specs = [replace(spec(tmp_path, j), side_by_side=True) for j in ("a", "b")]
    got = list(LocalExecutor(workers=2).run(progress_job, specs, tmp_path))
    search_events.unlisten(heard.append)
    assert [r.status for _, r in got] == ["ok", "ok"]
    assert len(heard) == 4 and sum(e.trial_epochs for e in heard) == 12
    assert len({e.search for e in heard}) == 2  # search 7 of each process is told apart
    # each job process forwards only: the listener it inherited (this test's) does not run there
    assert [(tmp_path / f"{j}.listeners").read_text() for j in ("a", "b")] == ["1", "1"]
    quiet = [replace(spec(tmp_path, j), side_by_side=True) for j in ("c", "d")]  # nobody listens: nothing sent
    assert [r.status for _, r in LocalExecutor(workers=2).run(progress_job, quiet, tmp_path)] == ["ok", "ok"]
    assert [(tmp_path / f"{j}.listeners").read_text() for j in ("c", "d")] == ["0", "0"]


MLP = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
       "init_args": {"subject_repeats": 1, "search": {"n_trials": 3, "n_startup_trials": 2, "max_epochs": 3},
                     "search_space": {"batch_size": [16, 32], "dropout": [0.0, 0.3]}}}


@needs_fork
def test_a_cell_split_over_two_job_processes_writes_the_records_of_one_process(tmp_path, bench_root):
    folders = {}
    for workers in (1, 2):
        folders[workers] = tmp_path / f"w{workers}"
        config = suite_config(bench_root, folders[workers], regimes=[MLP], tasks=["synthetic-hr"], folds=[0, 1, 2],
                              data={"synthetic_windows": 4},
                              executor={"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor",
                                        "init_args": {"workers": workers}})
        assert run(["--config", str(write_config(tmp_path / f"c{workers}.yaml", config))], "fit") == 0
    alone, split = search_records(folders[1]), search_records(folders[2])
    assert len(alone) == 3 and all(r["status"] == "ok" for r in alone.values())
    assert sorted(len(r.get("stack_group", [j])) for j, r in split.items()) == [1, 2, 2]  # [0, 1] and [2] alone
    assert len({r["worker"] for r in split.values()}) == 2 and {r["worker"] for r in alone.values()} == {
        f"{os.uname().nodename}:{os.getpid()}"}
    assert same_results(alone, split, ignore=("stack_group", "warnings", "worker")) == []
    threads = json.loads((folders[2] / "run.json").read_text())["threads"]
    assert (threads["processes"], threads["side_by_side"]) == (2, "networks")
    assert (folders[1] / "summary.csv").read_text() == (folders[2] / "summary.csv").read_text()


@needs_fork
def test_ctrl_c_stops_the_job_processes_with_one_line_and_the_rerun_finishes(tmp_path, bench_root):
    """Bound: 120 s. SIGINT to the whole process group (a terminal's Ctrl-C) while two job processes train."""
    import signal
    import subprocess
    import sys
    import time

    from tests.benchmark.helpers import LAUNCH

    out = tmp_path / "run"
    slow = {**MLP, "init_args": {**MLP["init_args"], "search": {"n_trials": 8, "n_startup_trials": 4,
                                                                  "max_epochs": 20}}}
    config = write_config(tmp_path / "c.yaml", suite_config(bench_root, out, regimes=[slow], tasks=["synthetic-hr"],
                                                           folds=[0, 1], data={"synthetic_windows": 20}))
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "fit", "--config", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90.0
        while len(list(out.glob("search/*/repeat0/optuna.db"))) < 2:  # both job processes are searching
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]  # type: ignore[union-attr]
            time.sleep(0.05)
        workers = [p for p in Path("/proc").glob("[0-9]*") if _parent(p) == proc.pid]
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted after 0 of 2 jobs; run the same command to resume" in err and "Traceback" not in err, err
    assert len(workers) == 2 and not [p for p in workers if p.exists() and _state(p) != "Z"]
    assert run(["--config", str(config)], "fit") == 0
    assert all(r["status"] == "ok" for r in search_records(out).values()) and len(search_records(out)) == 2


def _parent(proc_dir: Path) -> int | None:
    try:
        return int((proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _state(proc_dir: Path) -> str:
    try:
        return (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
