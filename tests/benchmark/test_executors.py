"""Every executor runs the same plan into the same records as the in-process reference run.

The process pool is checked by test_resume.py, whose killed and resumed pool run must match too.
"""

from __future__ import annotations

import pytest

from tests.benchmark.helpers import records, run, same_results, suite_config, write_config

EXECUTORS = {
    "submitit-debug": ["--executor", "submitit", "--executor.init_args.cluster", "debug",
                       "--executor.init_args.poll_s", "0.1"],
    "submitit-local": ["--executor", "submitit", "--executor.init_args.cluster", "local",
                       "--executor.init_args.jobs_per_task", "4", "--executor.init_args.poll_s", "0.5",
                       "--executor.init_args.parameters", "{timeout_min: 10}"],
    "dask": ["--executor", "dask", "--executor.init_args.processes", "false", "--executor.init_args.workers", "1"],
}


@pytest.mark.parametrize("name", list(EXECUTORS))
def test_executor_reproduces_the_local_records(tmp_path, bench_root, reference, name):
    run_dir = tmp_path / "run"
    config = write_config(tmp_path / "config.yaml", suite_config(bench_root, run_dir))
    assert run(["--config", str(config), *EXECUTORS[name]]) == 0
    got = records(run_dir)
    # Jobs in other processes compute their own source digest (others may be editing the package).
    assert same_results(got, reference["records"], ignore=("code_version",) if name != "dask" else ()) == []
    if name == "submitit-local":  # jobs really ran in other processes (the pool: see test_resume.py)
        assert {r["worker"] for r in got.values()}.isdisjoint(r["worker"] for r in reference["records"].values())


def test_per_rank_ddp_needs_an_executor_that_launches_ranks():
    from types import SimpleNamespace

    from ppgbench_pl.benchmark.executors import LocalExecutor, ProcessExecutor, SubmititExecutor
    from ppgbench_pl.benchmark.preflight import check_strategy
    from ppgbench_pl.errors import ConfigError

    def suite(**kw):
        return SimpleNamespace(trainer_kwargs=kw)

    for executor in (LocalExecutor(), ProcessExecutor(workers=1)):
        with pytest.raises(ConfigError, match="ddp_spawn"):
            check_strategy(suite(strategy="ddp", devices=2), executor)  # type: ignore[arg-type]
        check_strategy(suite(strategy="ddp_spawn", devices=2), executor)  # type: ignore[arg-type]
        check_strategy(suite(strategy="ddp", devices=1), executor)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="'auto' on several devices"):  # Lightning's DDP: it deadlocked
            check_strategy(suite(strategy="auto", devices=2), executor)  # type: ignore[arg-type]
        check_strategy(suite(strategy="auto", devices="auto"), executor)  # type: ignore[arg-type]
    check_strategy(suite(strategy="ddp", devices=[0, 1]), SubmititExecutor())  # type: ignore[arg-type]


def test_only_rank_zero_of_a_multi_process_job_writes(monkeypatch):
    from ppgbench_pl.benchmark.worker import global_rank

    for name in ("RANK", "PMI_RANK", "SLURM_NTASKS", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    assert global_rank() == 0
    monkeypatch.setenv("SLURM_PROCID", "3")  # an array task of one process: always rank 0
    assert global_rank() == 0
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert global_rank() == 3
    monkeypatch.setenv("RANK", "1")
    assert global_rank() == 1
