"""``kill -9`` during a stacked neural search, then the same command: every record field (timing aside) and every
prediction array equal an uninterrupted run's (issue 30 item 1). Three processes each: the reference, the
killed run and the resumed run, so float results are compared exactly.

``tests/test_engine_resume_regimes.py`` kills the same searches in-process at every point of their work (in
the default suite); these take minutes on a shared CPU, hence `slow`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.benchmark.helpers import LAUNCH, VOLATILE, record_files, suite_config, write_config

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

#: Dies (SIGKILL, from inside: deterministic) at the second epoch of the first trial of a study's second batch.
KILLER = ("import os, signal, optuna; r = optuna.trial.Trial.report; batch = int(os.environ['BATCH'])\n"
          "def report(self, value, step):\n"
          "    if self.number >= batch and step == 1: os.kill(os.getpid(), signal.SIGKILL)\n"
          "    return r(self, value, step)\n"
          "optuna.trial.Trial.report = report\n")


def _fit(config: Path, batch: int, kill: bool = False) -> subprocess.CompletedProcess:
    code = (KILLER if kill else "") + LAUNCH
    env = {**__import__("os").environ, "BATCH": str(batch), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code, "fit", "--config", str(config)], capture_output=True,
                          text=True, timeout=600, env=env)


def _records(folder: Path) -> dict[str, dict]:
    """Records by job id, timing left out; the run folder named ``<run>`` (the storage URL holds it)."""
    out = {}
    for path in record_files(folder):
        record = json.loads(path.read_text().replace(str(folder), "<run>"))
        for key in VOLATILE:
            record.pop(key, None)
        for result in record.get("results", []):
            for trial in result["optuna"]["trials"]:
                trial.pop("seconds")
        out[path.parent.name] = record
    return out


def _predictions(folder: Path) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for path in sorted((folder / "jobs").glob("*/predictions_*.npz")):
        with np.load(path, allow_pickle=False) as arrays:
            out[f"{path.parent.name}/{path.name}"] = {k: arrays[k] for k in arrays.files}
    return out


def _kill_and_resume(tmp_path: Path, engine_root: Path, regime: dict, batch: int, **config) -> None:
    folders = {name: tmp_path / name for name in ("reference", "killed")}
    paths = {name: write_config(tmp_path / f"{name}.yaml",
                                suite_config(engine_root, folder, regimes=[regime], **config))
             for name, folder in folders.items()}
    done = _fit(paths["reference"], batch)
    assert done.returncode == 0, done.stderr[-2000:]
    killed = _fit(paths["killed"], batch, kill=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert list((folders["killed"] / "search").glob("*/repeat0/optuna.db"))  # trials were stored before the kill
    resumed = _fit(paths["killed"], batch)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    expected, got = _records(folders["reference"]), _records(folders["killed"])
    assert expected and got.keys() == expected.keys()
    for jid, record in expected.items():
        assert record["status"] == "ok" and got[jid] == record, jid
    want, have = _predictions(folders["reference"]), _predictions(folders["killed"])
    assert want and have.keys() == want.keys()
    for name, arrays in want.items():
        assert arrays.keys() == have[name].keys()
        for key, array in arrays.items():
            assert array.dtype == have[name][key].dtype and np.array_equal(array, have[name][key]), (name, key)


@pytest.mark.slow
def test_a_stacked_mlp_search_killed_mid_trial_resumes_to_the_same_records(tmp_path, engine_root):
    """Two folds' studies in one stack (the issue's case: the trial cut short got other parameters)."""
    mlp = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
           "init_args": {"stack_jobs": 2, "subject_repeats": 1,
                         "search": {"n_trials": 4, "n_startup_trials": 2, "max_epochs": 3}}}
    _kill_and_resume(tmp_path, engine_root, mlp, 1, tasks=["synthetic-hr"], folds=[0, 1],
                     data={"synthetic_windows": 4})


@pytest.mark.slow
def test_a_stacked_finetune_search_killed_mid_trial_resumes_to_the_same_records(tmp_path, engine_root):
    """Two trials asked together per batch, trained as one stack; killed in the second batch."""
    finetune = {"class_path": "ppgbench_pl.regimes.finetune.FinetuneRegime",
                "init_args": {"subject_repeats": 1, "search_space": {"batch_size": [16, 32]},
                              "search": {"n_trials": 4, "n_startup_trials": 2, "max_epochs": 2,
                                         "parallel_trials": 2}}}
    _kill_and_resume(tmp_path, engine_root, finetune, 2, tasks=["synthetic-hr"], folds=[0],
                     data={"synthetic_windows": 4})
