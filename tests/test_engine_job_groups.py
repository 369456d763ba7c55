"""Jobs of one cell trained in one stack (``stack_jobs``) give the records each job gets when run alone."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from ppgbench_pl.benchmark.groups import job_groups
from tests.benchmark.helpers import (
    LAUNCH,
    record_files,
    run,
    same_results,
    search_records,
    suite_config,
    write_config,
)


def _mlp(stack_jobs: int) -> dict:
    return {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
            "init_args": {"stack_jobs": stack_jobs, "subject_repeats": 1,
                          "search": {"n_trials": 3, "n_startup_trials": 2, "max_epochs": 3},
                          "search_space": {"batch_size": [16, 32], "dropout": [0.0, 0.3]}}}


#: Every job in the command's process: these tests are about one stack (the local pool would split it).
HERE = {"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor", "init_args": {"workers": 1}}


def test_a_stacked_group_writes_the_records_of_jobs_run_alone(tmp_path, engine_root):
    folders = {}
    for width in (1, 3):
        folders[width] = tmp_path / f"stack{width}"
        config = suite_config(engine_root, folders[width], regimes=[_mlp(width)], tasks=["synthetic-hr"],
                              folds=[0, 1, 2], data={"synthetic_windows": 4}, executor=HERE)
        assert run(["--config", str(write_config(tmp_path / f"c{width}.yaml", config))], "fit") == 0
    alone, stacked = search_records(folders[1]), search_records(folders[3])
    assert len(alone) == 3 and all(r["status"] == "ok" for r in alone.values())
    assert all(r["results"][0]["optuna"]["trials"] for r in alone.values())  # the searches are compared too
    assert all(len(r.get("stack_group", [])) == 3 for r in stacked.values())  # 3 folds, one stack
    # warnings are counted per process over the shared fit, so a group's records count the group's
    assert same_results(alone, stacked, ignore=("stack_group", "warnings")) == []
    summary = {w: (folders[w] / "summary.csv").read_text() for w in folders}
    assert summary[1] == summary[3]


def test_job_groups_batch_a_cell_by_stack_jobs_and_leave_other_regimes_alone():
    from types import SimpleNamespace as NS

    mlp, linear = NS(name="mlp", stack_jobs=2, trains_trials=True), NS(name="linear", trains_trials=False)
    task = NS(name="t")

    def job(model, regime, fold):
        return NS(model_name=model, task=task, regime=regime, job_id=f"{model}-{regime.name}-{fold}")

    pending = [job("a", mlp, 0), job("a", linear, 0), job("a", mlp, 1), job("a", mlp, 2), job("b", mlp, 0)]
    assert job_groups(pending) == [["a-mlp-0", "a-mlp-1"], ["a-linear-0"], ["a-mlp-2"], ["b-mlp-0"]]


def _stored_trials(out):
    """(job id, trial number) -> (params, value) of every trial on durable storage (what survives a kill)."""
    import optuna

    found = {}
    for db in (out / "search").glob("*/repeat0/optuna.db"):
        storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
        for summary in optuna.get_all_study_summaries(storage):
            for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials:
                found[(db.parent.parent.name, t.user_attrs["number"])] = (t.params, t.value)
        storage.engine.dispose()
    return found


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_killed_group_resumes_per_job_and_per_trial(tmp_path, engine_root):
    """kill -9 while a group trains: no half record; stored trials are kept as they were, the rerun completes.

    The trials stored before the kill are exactly the uninterrupted run's; the rest of a cut search is drawn
    by a sampler restarted from its seed (protocol decision #41), so only the completed jobs' records are
    compared whole.
    """
    config = {"regimes": [_mlp(3)], "tasks": ["synthetic-hr"], "folds": [0, 1, 2], "data": {"synthetic_windows": 4},
              "executor": HERE}
    reference = tmp_path / "reference"
    assert run(["--config", str(write_config(tmp_path / "ref.yaml", suite_config(engine_root, reference, **config)))],
               "fit") == 0
    expected = search_records(reference)
    out = tmp_path / "killed"
    path = write_config(tmp_path / "killed.yaml", suite_config(engine_root, out, **config))
    # kill -9 from inside, right after the second finished trial reached the storage (deterministic)
    killer = ("import os, signal; from ppgbench_pl.hpo import optuna_search as o; f = o.PersistentStudy.finish; n = [0]\n"
              "def finish(self, trial, outcome):\n    f(self, trial, outcome); n[0] += 1\n"
              "    if n[0] == 2: os.kill(os.getpid(), signal.SIGKILL)\n"
              "o.PersistentStudy.finish = finish\n")
    killed = subprocess.run([sys.executable, "-c", killer + LAUNCH, "fit", "--config", str(path), "--progress", "false"],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    survived = _stored_trials(out)
    assert len(survived) == 2 and not record_files(out)
    for (jid, number), (params, value) in survived.items():
        trial = expected[jid]["results"][0]["optuna"]["trials"][number]
        # another process, maybe another thread count: float rounding only (as same_results allows)
        assert trial["params"] == params and trial["value"] == pytest.approx(value, rel=1e-6)
    rerun = subprocess.run([sys.executable, "-c", LAUNCH, "fit", "--config", str(path), "--progress", "false"],
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    resumed = search_records(out)
    assert resumed.keys() == expected.keys() and all(r["status"] == "ok" for r in resumed.values())
    for jid, record in resumed.items():
        trials = record["results"][0]["optuna"]["trials"]
        assert [t["number"] for t in trials] == list(range(len(trials)))
        assert sum(t["state"] in ("COMPLETE", "PRUNED") for t in trials) == 3
        for t in trials:
            if (jid, t["number"]) in survived:
                assert (t["params"], t["value"]) == survived[(jid, t["number"])]  # kept as stored, not retrained
