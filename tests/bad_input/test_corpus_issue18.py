"""The bad-input corpus, issue 18: nothing silent, nothing late.

Each case is refused in one line before the first embedding is computed, or handled correctly where it
is a fault (concurrent plans, deleted predictions, a full disk, a stuck lock). The rules and the tiny
suite are those of :mod:`tests.bad_input.test_corpus` (``check``: the exit status, at most two stderr
lines, no traceback, the expected line on stderr).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tests.bad_input.test_corpus import _job, base, check, config, copy_run, fit  # noqa: F401 - base: fixture
from tests.benchmark.helpers import LAUNCH, record_files, status, write_config

REPO = Path(__file__).resolve().parents[2]


# -- 1. summaries that see every record -----------------------------------------------------------------
def test_two_plans_at_once_into_one_folder(base, tmp_path):  # noqa: F811
    """Two ``fit``s with different task lists into one folder at once: both files cover every record."""
    out = tmp_path / "run"
    paths = []
    for task in ("synthetic-hr", "synthetic-age"):
        cfg = config(base["root"], out, tasks=[task])
        cfg["data"]["init_args"]["folds"] = [0, 1, 2]
        paths.append(write_config(tmp_path / f"{task}.yaml", cfg))
    env = {**os.environ, "WANDB_MODE": "disabled"}
    procs = [subprocess.Popen([sys.executable, "-c", LAUNCH, "fit", "--config", str(p)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for p in paths]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        check((proc.returncode, "", err), 0, r"^")
    assert len(record_files(out)) == 6
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["task"]) == {"synthetic-hr", "synthetic-age"}
    assert set(summary.loc[summary["model"] == "small_cnn", "n_folds"]) == {3}
    state = status(out)
    assert (state["completed"], state["planned"], state["failed"], state["complete"]) == (6, 6, 0, True)


def test_the_summary_sees_records_another_command_wrote_meanwhile(base, tmp_path, capsys, monkeypatch):  # noqa: F811
    """A record (of another plan) that appears while a command runs is in that command's final files."""
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun

    out = copy_run(base, tmp_path)
    shutil.rmtree(out / "jobs")
    other = tmp_path / "other"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(other),
              "--data.init_args.tasks", "[synthetic-age]"), 0, r"^")
    (jid,) = [p.parent.name for p in record_files(other)]
    prepare = BenchmarkRun._prepare

    def meanwhile(self, suite, pending):  # another command finishes a job of its plan during this run
        prepare(self, suite, pending)
        shutil.copytree(other / "jobs" / jid, out / "jobs" / jid)
        run_json = json.loads((out / "run.json").read_text())
        (out / "run.json").write_text(json.dumps({**run_json, "planned_jobs": [*run_json["planned_jobs"], jid]}))

    monkeypatch.setattr(BenchmarkRun, "_prepare", meanwhile)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0, r"^")
    assert set(pd.read_csv(out / "summary.csv")["task"]) == {"synthetic-hr", "synthetic-age"}
    assert (status(out)["completed"], status(out)["planned"]) == (2, 2)


# -- 2. checked before compute: refused before anything is written -----------------------------------------
#: (extra arguments, exit status, stderr regex); each runs into a fresh output folder that must stay absent.
BEFORE: dict[str, tuple[list[str], int, str]] = {
    "seeds_negative": (["--data.init_args.seeds", "[-1]"], 2,
                       r"^ppgbench: error: data\.init_args\.seeds=\[-1\]: -1 is negative; data\.init_args\.seeds "
                       r"must be integers >= 0$"),
    "seeds_one_negative": (["--data.init_args.seeds", "[42, -3]"], 2, r"seeds=\[42, -3\]: -3 is negative"),
    "optuna_storage_bogus": (["--optuna_storage", "bogus"], 2,
                             r"optuna_storage bogus: not a storage URL \(expected dialect://"),
    "optuna_storage_dialect": (["--optuna_storage", "nosuchdb://host/x"], 2,
                               r"optuna_storage nosuchdb://host/x: SQLAlchemy has no database dialect 'nosuchdb'"),
    "optuna_storage_placeholder": (["--optuna_storage", "sqlite:///{job}.db"], 2,
                                   r"optuna_storage sqlite:///\{job\}\.db: unknown placeholder \{job\}"),
    "optuna_storage_journal_empty": (["--optuna_storage", "journal:"], 2, r"journal: needs a file path"),
    "data_root_unwritable": (["--data.init_args.root", "/proc/ppgbench-data"], 2,
                             r"data\.root /proc/ppgbench-data: cannot write the synthetic trees there"),
}
if not torch.cuda.is_available():
    BEFORE["accelerator_gpu"] = (["--trainer.accelerator", "gpu"], 2,
                                 r"^ppgbench: error: trainer\.accelerator gpu: no CUDA GPU is visible on this machine")
    BEFORE["accelerator_cuda"] = (["--trainer.accelerator", "cuda"], 2, r"trainer\.accelerator cuda: no CUDA GPU")


@pytest.mark.parametrize("command", ["fit", "benchmark"])
@pytest.mark.parametrize("case", list(BEFORE))
def test_refused_before_compute(base, tmp_path, capsys, case, command):  # noqa: F811
    args, code, pattern = BEFORE[case]
    out = tmp_path / "new_run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), *args, command=command),
          code, pattern)
    assert not out.exists()


#: API arguments refused in one line naming the argument (before any data is read).
API: dict[str, tuple[dict[str, Any], str]] = {
    "seeds_string": ({"seeds": "42"}, r"^seeds='42': must be a list of integers \(e\.g\. seeds=\[42, 43\]\), not a str$"),
    "seeds_int": ({"seeds": 42}, r"^seeds=42: must be a list of integers"),
    "seeds_negative": ({"seeds": [-1]}, r"^seeds=\[-1\]: -1 is negative"),
    "seeds_float": ({"seeds": [42.5]}, r"^seeds=\[42\.5\]: 42\.5 is not an integer"),
    "seeds_bool": ({"seeds": [True]}, r"^seeds=\[True\]: True is not an integer"),
    "folds_string": ({"folds": "0"}, r"^folds='0': must be a list of integers \(e\.g\. folds=\[0, 1\]\)"),
    "optuna_storage": ({"optuna_storage": "bogus"}, r"^optuna_storage bogus: not a storage URL"),
}


@pytest.mark.parametrize("case", list(API))
def test_api_arguments_refused(base, tmp_path, case):  # noqa: F811
    import ppgbench_pl as pb
    from ppgbench_pl.errors import ConfigError

    kwargs, pattern = API[case]
    args = {"seeds": [42], "folds": [0], **kwargs}
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as info:
        pb.evaluate("small_cnn", dataset="synthetic", tasks=["synthetic-hr"], controls=(), output_dir=out,
                    root=str(base["root"]), synthetic_subjects=10, synthetic_windows=4, progress=False, **args)
    assert re.search(pattern, str(info.value)) and "\n" not in str(info.value), str(info.value)
    assert not out.exists()


def _set(name: str, value: Any, group: int = 0, dtype: Any = None) -> Callable[[Path], str]:
    """Damage: one label of one subject's ``name`` set to ``value``; returns the subject's folder name."""
    def damage(root: Path) -> str:
        folder = sorted((root / "fs_64" / "Synthetic").glob("S*"))[group]
        labels = np.load(folder / name)
        if dtype is not None:
            labels = labels.astype(dtype)
        labels[1] = value
        np.save(folder / name, labels)
        return folder.name
    return damage


#: (damage, task, stderr regex with {subject} and {path}); refused before any embedding, nothing written.
LABELS: dict[str, tuple[Callable[[Path], str], str, str]] = {
    "class_999": (_set("activity.npy", 999), "synthetic-activity",
                  r"^ppgbench: error: {path}: subject {subject}: task synthetic-activity: label 999 is not a class "
                  r"of the task \(classes 0-2 \(rest, walk, run\); -1 marks a window without a label\)$"),
    "class_negative": (_set("activity.npy", -5), "synthetic-activity", r"{path}: subject {subject}: .*label -5"),
    "class_fraction": (_set("activity.npy", 1.5, dtype=np.float64), "synthetic-activity",
                       r"{path}: subject {subject}: task synthetic-activity: class label 1\.5 is not an integer"),
    "hr_1e6": (_set("hr.npy", 1e6), "synthetic-hr",
               r"{path}: subject {subject}: task synthetic-hr: label 1e\+06 bpm is outside 10-400 bpm"),
    "hr_inf": (_set("hr.npy", np.inf), "synthetic-hr", r"{path}: subject {subject}: .*label inf bpm"),
    "hr_strings": (_set("hr.npy", "x", dtype="<U8"), "synthetic-hr",
                   r"{path}: subject {subject}: task synthetic-hr: labels are <U8 values, not numbers"),
}


@pytest.mark.parametrize("case", list(LABELS))
def test_label_values_refused_naming_file_and_subject(base, tmp_path, capsys, case):  # noqa: F811
    damage, task, pattern = LABELS[case]
    root = tmp_path / "data"
    shutil.copytree(base["root"], root)
    subject = damage(root)
    path = root / "fs_64" / "Synthetic" / subject / ("activity.npy" if "activity" in task else "hr.npy")
    out = tmp_path / "run"
    args = ["--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.root", str(root),
            "--data.init_args.tasks", f"[{task}]"]
    err = check(fit(capsys, *args), 2, pattern.format(path=re.escape(str(path)), subject=subject))
    assert "embeddings:" not in err and not out.exists()


def test_an_all_nan_checkpoint_stops_at_the_first_embedding_batch(base, tmp_path, capsys):  # noqa: F811
    from tests.bad_input.test_corpus import custom
    from tests.encoders.test_custom import TinyConvNet

    weights = tmp_path / "nan.pt"
    torch.save({k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                for k, v in TinyConvNet().state_dict().items()}, weights)
    out = tmp_path / "run"
    block = custom(random_init=False, checkpoint=str(weights))
    path = write_config(tmp_path / "c.yaml", config(base["root"], out, encoder=block))
    check(fit(capsys, "--config", str(path), "--data.init_args.batch_size", "8"), 2,
          r"^ppgbench: error: encoder tiny_conv_net: embeddings of batch 0 on synthetic at 64 Hz contain NaN/inf in 8 of "
          r"8 rows; check its checkpoint \(non-finite weights\?\)")
    assert not record_files(out) and not list((out / "embeddings").glob("*.npy"))


def _one_class_test_fold(root: Path, seed: int = 42, fold: int = 0) -> list[str]:
    """Give every subject of one outer test fold of synthetic-activity class 0; the others keep theirs."""
    from ppgbench_pl.data.registry import get_task
    from ppgbench_pl.datamodules.ppg import PPGDataModule

    dm = PPGDataModule("synthetic", root=str(root), synthetic_subjects=10, synthetic_windows=4)
    view = dm.task_view(64.0, get_task("synthetic-activity"))
    test = sorted(set(view.groups[dm.outer_split(view, seed, fold).test].tolist()))
    for name in test:
        path = root / "fs_64" / "Synthetic" / name / "activity.npy"
        np.save(path, np.zeros_like(np.load(path)))
    return test


def test_a_degenerate_outer_fold_is_listed_and_recorded_while_the_rest_runs(base, tmp_path, capsys):  # noqa: F811
    root = tmp_path / "data"
    shutil.copytree(base["root"], root)
    _one_class_test_fold(root)
    out = tmp_path / "run"
    args = ["--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.root", str(root),
            "--data.init_args.tasks", "[synthetic-activity]", "--data.init_args.folds", "[0, 1]"]
    code, plan, err = fit(capsys, *args, "--dry_run")
    assert code == 0 and re.search(r"^not evaluable, .*synthetic-activity seed 42 fold 0: every test label is "
                                   r"class 0$", plan, re.M), plan
    assert not out.exists()
    check(fit(capsys, *args), 0, r"^not evaluable, recorded without training \(1 jobs, one class in a fold's "
                                       r"test or training part\): synthetic-activity seed 42 fold 0: every test "
                                       r"label is class 0$")
    by_fold = {json.loads(p.read_text())["fold"]: json.loads(p.read_text()) for p in record_files(out)}
    assert by_fold[0]["status"] == "not_evaluable" and "results" not in by_fold[0]
    assert by_fold[1]["status"] == "ok"
    state = status(out)
    assert (state["completed"], state["not_evaluable"], state["failed"], state["complete"]) == (1, 1, 0, True)
    assert list(state["not_evaluable_jobs"]) == [by_fold[0]["job_id"]]
    assert set(pd.read_csv(out / "summary.csv")["n_folds"]) == {1}
    code, text, _ = fit(capsys, *args)  # a rerun trains nothing and writes nothing new
    assert code == 0 and "0 jobs run, 1 already done, 1 not evaluable" in text


# -- 4. disk faults ---------------------------------------------------------------------------------------
def test_a_full_disk_ends_in_one_line_naming_the_file(base, tmp_path, capsys, monkeypatch):  # noqa: F811
    """ENOSPC while status.json is written (after the records and summary.csv): one line, records intact."""
    import errno

    from ppgbench_pl import atomic_io

    out = copy_run(base, tmp_path)
    shutil.rmtree(out / "jobs")
    replace = os.replace

    def full(src: Any, dst: Any) -> None:
        if Path(dst).name == "status.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(atomic_io.os, "replace", full)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 2,
          rf"^ppgbench: error: {re.escape(str(out / 'status.json'))}: no space left on the device \(needs about "
          r"[\d,]+ bytes, [\d,]+ bytes free\); nothing was half-written")
    assert len(record_files(out)) == 1 and (out / "summary.csv").exists()
    assert not list(out.rglob("*.tmp"))
