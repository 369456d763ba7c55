"""The bad-input corpus, issue 18 (the rest): one line always, stuck locks, tasks that cannot run, raw rates.

The rules and the tiny suite are those of :mod:`tests.bad_input.test_corpus` (``check``: the exit status,
at most two stderr lines, no traceback, the expected line on stderr).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.bad_input.test_corpus import _job, base, check, config, copy_root, copy_run, fit  # noqa: F401 - base
from tests.benchmark.helpers import record_files, status, write_config

REPO = Path(__file__).resolve().parents[2]

# -- 5. one line, always: the bad value and the accepted ones ---------------------------------------------
#: (extra arguments, stderr regex); each runs into a fresh output folder that must stay absent.
ONE_LINE: dict[str, tuple[list[str], str]] = {
    "seed_everything_ignored": (["--seed_everything", "7"],
                                r"^ppgbench: error: seed_everything=7 has no effect: every job is seeded from its "
                                r"outer seed, as published; choose those with data\.init_args\.seeds$"),
    "auto_strategy_two_devices": (["--trainer.devices", "2"],
                                  r"^ppgbench: error: trainer\.strategy 'auto' on several devices needs one process "
                                  r"per rank: use 'ddp_spawn', or the submitit executor .*$"),
    "fp16_on_cpu": (["--trainer.precision", "16-mixed", "--trainer.accelerator", "cpu"],
                    r"^ppgbench: error: trainer\.precision 16-mixed: Lightning would run bf16-mixed on cpu; fp16 "
                    r"mixed precision needs CUDA: ask for bf16-mixed or 32-true$"),
    "precision_bogus": (["--trainer.precision", "bogus"],
                        r"^ppgbench: error: trainer\.precision: 'bogus' is not an accepted value \(choices: 64, 32, "
                        r"16, transformer-engine, .*bf16-mixed, 32-true, 64-true, bf16\)$"),
    "precision_typo": (["--trainer.precision", "bf16-mixd"],
                       r"trainer\.precision: 'bf16-mixd' is not an accepted value \(choices: .*\); did you mean "
                       r"'bf16-mixed'\?$"),
    "encoder_bare_unknown": (["--model.init_args.encoder", "papagei_x"],
                             r"^ppgbench: error: model\.encoder: 'papagei_x' is neither a class path nor a registered "
                             r"encoder name \(registered: papagei_p, papagei_s, .*small_cnn\); did you mean "
                             r"'papagei_s' \(ppgbench_pl\.encoders\.papagei\.PaPaGeiSEncoder\)\?$"),
    "encoder_bare_registered": (["--model.init_args.encoder", "small_cnn"],
                                r"^ppgbench: error: model\.encoder: 'small_cnn' is a registered encoder name; give its "
                                r"class path ppgbench_pl\.encoders\.cnn\.SmallCNNEncoder$"),
}


@pytest.mark.parametrize("case", list(ONE_LINE))
def test_one_line_names_the_value_and_the_accepted_ones(base, tmp_path, capsys, case):  # noqa: F811
    args, pattern = ONE_LINE[case]
    out = tmp_path / "new_run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), *args), 2, pattern)
    assert not out.exists()


#: API regimes refused in one line naming the regime and the bad setting (a ConfigError, no argparse nesting).
API_REGIMES: dict[str, tuple[Any, str]] = {
    "unknown_key": (("linear", {"nonsense": 1}),
                    r"^regime linear \(ppgbench_pl\.regimes\.LinearRegime\): 'nonsense' is not one of its settings "
                    r"\(accepted: binary_metric, single_class\)$"),
    "typo_key": (("linear", {"binary_metrik": "auroc"}), r"'binary_metrik' is not one of its settings \(accepted: "
                                                        r"binary_metric, single_class\); did you mean 'binary_metric'\?$"),
    "nested_key": (("mlp", {"search": {"n_trialz": 3}}),
                   r"^regime mlp \(ppgbench_pl\.regimes\.MLPRegime\): search: Option 'n_trialz' is not accepted; did "
                   r"you mean 'n_trials'\?$"),
    "bad_type": (("mlp", {"search": {"n_trials": "x"}}),
                 r"^regime mlp \(ppgbench_pl\.regimes\.MLPRegime\): search\.n_trials: Expected a <class 'int'>"),
}


@pytest.mark.parametrize("case", list(API_REGIMES))
def test_api_regime_settings_refused_in_one_line(base, tmp_path, case):  # noqa: F811
    import ppgbench_pl as pb
    from ppgbench_pl.errors import ConfigError

    regime, pattern = API_REGIMES[case]
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as info:
        pb.evaluate("small_cnn", dataset="synthetic", tasks=["synthetic-hr"], controls=(), output_dir=out,
                    root=str(base["root"]), synthetic_subjects=10, synthetic_windows=4, progress=False, seeds=[42],
                    folds=[0], regimes=[regime])
    message = str(info.value)
    assert re.search(pattern, message) and "\n" not in message, message
    assert not out.exists()


# -- 4. lock faults: a stuck holder is named with its PID and command; --lock_timeout gives up ------------
def _hold(path: Path, *, seconds: float = 30, tool: bool = False) -> subprocess.Popen[str]:
    """Another process that takes ``path``'s lock and then sleeps (no progress); ``tool``: the flock tool."""
    if tool:
        command = ["flock", str(path), "sleep", str(seconds)]
    else:
        command = [sys.executable, "-c", "import sys, time; from ppgbench_pl.locks import file_lock\n"
                   "with file_lock(sys.argv[1]):\n print('held', flush=True); time.sleep(float(sys.argv[2]))",
                   str(path), str(seconds)]
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    if tool:
        from ppgbench_pl.locks import LockBusy, file_lock

        for _ in range(200):  # until the tool holds it
            try:
                with file_lock(path, blocking=False):
                    time.sleep(0.02)
            except LockBusy:
                break
    else:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("tool", [False, True], ids=["ppgbench_holder", "flock_tool_holder"])
def test_lock_timeout_gives_up_naming_the_lock_and_its_stuck_holder(base, tmp_path, capsys, tool):  # noqa: F811
    """A job lock held by a process that sleeps: with --lock_timeout 1 that job fails in one line naming the lock
    and its holder (the rest of the plan would run), exit 1, nothing recorded for it (a rerun tries again)."""
    from ppgbench_pl.benchmark.job import job_lock_path

    out = copy_run(base, tmp_path)
    jid = _job(out).name
    shutil.rmtree(out / "jobs")
    lock = job_lock_path(out, jid)
    holder = _hold(lock, tool=tool)
    command = r"flock .*sleep 30" if tool else r".*python.* -c .*file_lock.*"
    try:
        started = time.monotonic()
        err = check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), "--lock_timeout", "1"),
                    1, rf"^failed: {jid}: --lock_timeout 1: gave up on the lock {re.escape(str(lock))} after 1 s: "
                       rf"held by pid {holder.pid} on [^ ]+ \({command}\)(, for \d+ s)?; the holder has used no CPU "
                       r"in the last \d+ s and looks stuck \(no progress\)$")
        assert time.monotonic() - started < 20, err
    finally:
        holder.kill()
        holder.wait()
    assert not record_files(out) and not list(out.rglob("*.tmp"))


def test_evaluate_takes_lock_timeout_like_fit(base, tmp_path):  # noqa: F811
    """``pb.evaluate(..., lock_timeout=1)``: the job whose lock another process holds fails naming the lock, the
    call returns (with a warning) instead of waiting for ever; a negative value is refused in one line."""
    import ppgbench_pl as pb
    from ppgbench_pl.benchmark.job import job_lock_path
    from ppgbench_pl.errors import ConfigError

    out = tmp_path / "api_run"
    args: dict[str, Any] = dict(dataset="synthetic", tasks=["synthetic-hr"], seeds=[42], folds=[0], controls=(),
                                output_dir=out, root=str(base["root"]), synthetic_subjects=10, synthetic_windows=4,
                                wandb="off", progress=False)
    with pytest.raises(ConfigError, match=r"^--lock_timeout -1: must be a number of seconds >= 0"):
        pb.evaluate("small_cnn", lock_timeout=-1, **args)
    with pytest.raises(ConfigError, match=r"lock_timeout.*'soon'"):
        pb.evaluate("small_cnn", lock_timeout="soon", **args)
    jid = pb.evaluate("small_cnn", **args).jobs["job_id"].iloc[0]
    shutil.rmtree(out / "jobs")
    holder = _hold(job_lock_path(out, jid))
    try:
        started = time.monotonic()
        with pytest.warns(UserWarning, match="1 of 1 jobs failed"):
            res = pb.evaluate("small_cnn", lock_timeout=1, **args)
        assert time.monotonic() - started < 20
    finally:
        holder.kill()
        holder.wait()
    assert len(res.failed) == 1 and re.search(rf"^{jid}: --lock_timeout 1: gave up on the lock ", res.failed[0])


def test_a_stopped_holder_is_reported_while_waiting(tmp_path):
    """The notice of a waiting process names a SIGSTOPped holder (PID, command) as making no progress."""
    from ppgbench_pl.locks import LockTimeout, file_lock, waiting_at_most

    lock = tmp_path / "x.lock"
    holder = _hold(lock)
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        with pytest.raises(LockTimeout) as info, waiting_at_most(0.3), file_lock(lock):
            pass
    finally:
        holder.kill()
        holder.wait()
    assert re.fullmatch(rf"--lock_timeout 0\.3: gave up on the lock {re.escape(str(lock))} after 0\.3 s: held by pid "
                        rf"{holder.pid} on \S+ \(.*file_lock.*\), for \d+ s; the holder is stopped \(SIGSTOP or a "
                        r"debugger\) and makes no progress", str(info.value)), str(info.value)


def test_lock_timeout_negative_is_refused(base, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "new_run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), "--lock_timeout", "-1"), 2,
          r"^ppgbench: error: --lock_timeout -1: must be a number of seconds >= 0 \(leave it unset to wait\)$")


# -- 7. run what can run: a task that cannot be evaluated is skipped when no task was named ---------------------
def _unlabel(root: Path, label: str, keep: int) -> None:
    """A partial download: ``label`` is NaN (no label) for every subject but the first ``keep``."""
    for folder in sorted((root / "fs_64" / "Synthetic").glob("S*"))[keep:]:
        path = folder / label
        np.save(path, np.full_like(np.load(path), np.nan, dtype=np.float32))


def test_a_task_that_cannot_be_evaluated_is_skipped_when_tasks_were_not_named(base, tmp_path, capsys):  # noqa: F811
    root = copy_root(base, tmp_path)
    _unlabel(root, "hr.npy", keep=1)
    out = tmp_path / "run"
    cfg = config(root, out)
    del cfg["data"]["init_args"]["tasks"]  # all of synthetic's tasks
    path = write_config(tmp_path / "all.yaml", cfg)
    skipped = (r"^skipped 1 task\(s\) that cannot be evaluated \(no tasks were named, so all of the dataset's were "
               r"tried\): task 'synthetic-hr' has 1 groups with valid labels; subject-disjoint CV needs at least 5 "
               r"\(at 64 Hz\)$")
    code, plan, err = fit(capsys, "--config", str(path), "--dry_run")
    assert code == 0 and re.search(skipped, plan, re.M) and "synthetic-hr" not in plan.split("skipped")[0], plan
    assert not out.exists()
    code, _, err = fit(capsys, "--config", str(path))  # stderr also lists a stiffness fold with one class
    assert code == 0 and "Traceback" not in err and re.search(skipped, err, re.M), err
    tasks = {json.loads(p.read_text())["task"] for p in record_files(out)}
    assert tasks == {"synthetic-activity", "synthetic-stiffness", "synthetic-age"}, tasks
    state = status(out)
    assert list(state["skipped_tasks"]) == ["synthetic-hr"] and "1 groups" in state["skipped_tasks"]["synthetic-hr"]
    assert state["planned"] == 3 and state["complete"] and state["failed"] == 0, state
    assert "synthetic-hr" not in set(pd.read_csv(out / "summary.csv")["task"])
    # a later command into the folder that names other tasks keeps the folder's list (status.json is the folder's)
    code, _, err = fit(capsys, "--config", str(path), "--data.init_args.tasks", "[synthetic-activity]")
    assert code == 0 and list(status(out)["skipped_tasks"]) == ["synthetic-hr"], (err, status(out))
    code, _, err = fit(capsys, str(out), "--output", str(tmp_path / "report"), command="report")
    page = (tmp_path / "report" / "index.html").read_text()
    assert code == 0 and "1 tasks were skipped: they cannot be evaluated" in page, err
    assert "synthetic-hr: task &#x27;synthetic-hr&#x27; has 1 groups with valid labels" in page
    # the same task named by the user still refuses the run, before anything is written
    other = tmp_path / "named"
    check(fit(capsys, "--config", str(path), "--output_dir", str(other), "--data.init_args.tasks", "[synthetic-hr]"),
          2, r"^ppgbench: error: task 'synthetic-hr' has 1 groups with valid labels; subject-disjoint CV needs at "
             r"least 5$")
    assert not other.exists()


def test_no_task_that_can_be_evaluated_refuses_the_run(base, tmp_path, capsys):  # noqa: F811
    root = copy_root(base, tmp_path)
    for label in ("hr.npy", "age.npy"):
        _unlabel(root, label, keep=2)
    for label in ("activity.npy", "stiffness.npy"):
        for folder in sorted((root / "fs_64" / "Synthetic").glob("S*"))[2:]:
            np.save(folder / label, np.full_like(np.load(folder / label), -1))
    out = tmp_path / "run"
    cfg = config(root, out)
    del cfg["data"]["init_args"]["tasks"]
    check(fit(capsys, "--config", str(write_config(tmp_path / "all.yaml", cfg))), 2,
          r"^ppgbench: error: no task of the plan can be evaluated: skipped 4 task\(s\) .*synthetic-hr.*synthetic-age")
    assert not out.exists()


# -- 2. raw-file sampling rates: outside 10 Hz-10 kHz refused naming the file and field ---------------------------
def _wildppg(tmp_path: Path, **rates: float) -> Path:
    """A one-participant WildPPG raw tree whose .mat states ``rates`` (``ecg`` / ``ppg``) instead of its own."""
    from scipy.io import loadmat, savemat

    from tests.data.wildppg.make_data import make

    make(tmp_path / "raw" / "wildppg", names=("an0",), duration_s=24.0)
    path = tmp_path / "raw" / "wildppg" / "WildPPG_Part_an0.mat"
    data = {k: v for k, v in loadmat(path, simplify_cells=True).items() if not k.startswith("__")}
    if "ecg" in rates:
        data["sternum"]["ecg"]["fs"] = rates["ecg"]
    if "ppg" in rates:
        data["wrist"]["ppg_g"]["fs"] = rates["ppg"]
    savemat(path, data)
    return path


RAW_RATES: dict[str, tuple[dict[str, float], str]] = {
    "wildppg_ecg_1e9": ({"ecg": 1e9}, r"sternum\.ecg\.fs: sampling rate 1e\+09 Hz is outside 10-10000 Hz \(a damaged "
                                      r"header, or a rate in another unit\?\)$"),
    "wildppg_ppg_5": ({"ppg": 5.0}, r"wrist\.ppg_g\.fs: sampling rate 5 Hz is outside 10-10000 Hz"),
    "wildppg_ppg_20k": ({"ppg": 20000.0}, r"wrist\.ppg_g\.fs: sampling rate 20000 Hz is outside 10-10000 Hz"),
}


@pytest.mark.parametrize("case", list(RAW_RATES))
def test_raw_rates_outside_the_bounds_are_refused_naming_the_file(tmp_path, capsys, case):
    rates, pattern = RAW_RATES[case]
    path = _wildppg(tmp_path, **rates)
    out = tmp_path / "processed"
    check(fit(capsys, "wildppg", "--raw-root", str(tmp_path / "raw"), "--fs", "64", "--output", str(out),
              command="preprocess"), 2, rf"^ppgbench: error: {re.escape(str(path))}: {pattern}")
    assert not (out / "fs_64").exists() or not any((out / "fs_64").iterdir())


def test_an_empatica_rate_outside_the_bounds_is_refused(tmp_path, capsys):
    from tests.data.ecsmp.make_data import make

    make(tmp_path / "raw" / "ecsmp")
    path = tmp_path / "raw" / "ecsmp" / "E4" / "001" / "BVP.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "1000000.0", *lines[2:]]) + "\n")
    check(fit(capsys, "ecsmp", "--raw-root", str(tmp_path / "raw"), "--fs", "64", "--output", str(tmp_path / "out"),
              command="preprocess"), 2,
          rf"^ppgbench: error: {re.escape(str(path))}: line 2: sampling rate 1e\+06 Hz is outside 10-10000 Hz")


def test_raw_rate_bounds() -> None:
    from ppgbench_pl.data.signal import raw_rate
    from ppgbench_pl.errors import DataError

    assert raw_rate(10, "f") == 10.0 and raw_rate(10_000.0, "f") == 10_000.0
    for bad in (9.99, 10_000.5, float("nan"), float("inf"), -64.0):
        with pytest.raises(DataError, match=r"^f: sampling rate .* is outside 10-10000 Hz"):
            raw_rate(bad, "f")
    with pytest.raises(DataError, match=r"^f: sampling rate 'x' is not a number$"):
        raw_rate("x", "f")  # type: ignore[arg-type]


# -- 8. a checkpoint whose 0-d tensors are Python ints: one line, not a traceback -------------------------------
def test_a_checkpoint_with_python_ints_for_0d_tensors_is_one_line(base, tmp_path, capsys):  # noqa: F811
    import torch

    from ppgbench_pl.encoders.cnn import SmallCNNEncoder

    state = {k: v.item() if v.dim() == 0 else v for k, v in SmallCNNEncoder().weights_module().state_dict().items()}
    path = tmp_path / "ints.pt"
    torch.save(state, path)
    out = tmp_path / "run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out),
              "--model.init_args.encoder.init_args.checkpoint", str(path)), 2,
          rf"^ppgbench: error: {re.escape(str(path))}: checkpoint entries \[features\.1\.num_batches_tracked, "
          r"features\.4\.num_batches_tracked, features\.7\.num_batches_tracked\] are int values, not tensors \(0-d "
          r"tensors saved as Python numbers\?\); save the weights with torch\.save\(model\.state_dict\(\)\)$")
    assert not record_files(out) if out.exists() else True


# -- 3. load_run / Results on damaged folders: a listed warning naming the file, never a row of garbage -----------
def _warned(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = call()
    return value, [str(w.message) for w in caught]


def test_load_run_names_corrupt_and_foreign_records(base, tmp_path):  # noqa: F811
    import ppgbench_pl as pb

    out = copy_run(base, tmp_path)
    record = _job(out) / "results.json"
    good = json.loads(record.read_text())
    record.write_text('{"job_id": ')  # cut off
    foreign = out / "jobs" / "x" / "results.json"
    foreign.parent.mkdir()
    foreign.write_text(json.dumps({"foo": 1}))
    copied = out / "jobs" / "y" / "results.json"
    copied.parent.mkdir()
    copied.write_text(json.dumps(good))
    res = pb.load_run(out)
    jobs, warned = _warned(lambda: res.jobs)
    assert len(jobs) == 0
    assert warned == [f"skipped {record}: is not valid JSON (Expecting value at line 1 column 12)",
                      f"skipped {foreign}: is not a ppgbench job record (no job_id or status)",
                      f"skipped {copied}: is the record of job {good['job_id']!r}, not of its folder 'y' (copied in?)"]
    assert res.problems == [w.removeprefix("skipped ") for w in warned]
    summary, warned = _warned(lambda: res.summary)  # the summary.csv of before, and the same warnings
    assert len(warned) == 3 and list(summary["task"]) == ["synthetic-hr"] * len(summary)


def test_load_run_recomputes_a_garbage_summary_naming_it(base, tmp_path):  # noqa: F811
    import ppgbench_pl as pb

    out = copy_run(base, tmp_path)
    before = pd.read_csv(out / "summary.csv")
    for text, why in (("a,b\n1,2\n", "is not a ppgbench summary (no column model, task, regime, metric, mean)"),
                      (before.assign(mean="x").to_csv(index=False), "row 2: mean 'x' is not a number"),
                      ("\x00\xff garbage", None)):
        (out / "summary.csv").write_text(text)
        summary, warned = _warned(lambda: pb.load_run(out).summary)
        assert len(warned) == 1 and warned[0].startswith(f"{out / 'summary.csv'}: ") and warned[0].endswith(
            "; the summary is recomputed from the job records"), warned
        assert why is None or why in warned[0], warned
        key = ["model", "task", "regime"]
        assert summary[key + ["mean"]].sort_values(key).reset_index(drop=True).equals(
            before[key + ["mean"]].sort_values(key).reset_index(drop=True))


def test_predictions_take_a_job_id_or_a_row_index_and_name_the_job(base, tmp_path):  # noqa: F811
    import ppgbench_pl as pb
    from ppgbench_pl.errors import DataError

    out = copy_run(base, tmp_path)
    res = pb.load_run(out)
    jid = res.jobs["job_id"][0]
    by_index, by_id = res.predictions(0), res.predictions(jid)
    assert by_index.keys() == by_id.keys() and all((by_index[k] == by_id[k]).all() for k in by_id)
    assert res.predictions(-1).keys() == by_id.keys()
    with pytest.raises(DataError, match=rf"^{re.escape(str(out))}: predictions\(3\): Results\.jobs has rows 0-0$"):
        res.predictions(3)
    with pytest.raises(DataError, match=r"^predictions\(1\.5\): give a job id \(Results\.jobs\.job_id\) or a row "
                                        r"index of Results\.jobs, not a float$"):
        res.predictions(1.5)  # type: ignore[arg-type]
    path = out / "jobs" / jid / "predictions_repeat0.npz"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DataError) as info:
        res.predictions(0)
    assert re.fullmatch(rf"{re.escape(str(path))}: Results\.jobs row 0 \(job {jid}\): the predictions file is "
                        r"damaged or truncated \(BadZipFile: .*\)", str(info.value)), str(info.value)


# -- 2. the types of every API argument: one line naming the argument, before anything is read ------------------
API_TYPES: dict[str, tuple[dict[str, Any], str]] = {
    "regimes_int": ({"regimes": 5}, r"^regimes=5: must be a list of regime names, \(name, init_args\) pairs, entry "
                                    r"dicts or Regime instances, not a int$"),
    "regime_pair_bad": ({"regimes": [("linear", 5)]}, r"^regimes: \('linear', 5\): a pair must be \(name, init_args "
                                                      r"dict\)"),
    "regime_none": ({"regimes": [None]}, r"^regimes: None: not a regime"),
    "dataset_int": ({"dataset": 3}, r"^dataset=3: must be a str, not a int$"),
    "tasks_int": ({"tasks": 7}, r"^tasks=7: must be a list of task names, not a int$"),
    "tasks_item_int": ({"tasks": ["synthetic-hr", 7]}, r"^tasks=7: must be a str, not a int$"),
    "controls_int": ({"controls": 1}, r"^controls=1: must be a list of encoders"),
    "output_dir_int": ({"output_dir": 5}, r"^output_dir=5: must be a str or a Path, not a int$"),
    "subjects_str": ({"synthetic_subjects": "8"}, r"^synthetic_subjects='8': must be an int, not a str$"),
    "subjects_bool": ({"synthetic_subjects": True}, r"^synthetic_subjects=True: must be an int, not a bool$"),
    "max_subjects_float": ({"max_subjects": 2.5}, r"^max_subjects=2\.5: must be an int or None, not a float$"),
    "progress_str": ({"progress": "no"}, r"^progress='no': must be True or False, not a str$"),
    "wandb_bad": ({"wandb": "maybe"}, r"^wandb='maybe': must be one of 'group', 'per-job', 'off', True, False$"),
    "ci_unit_bad": ({"ci_unit": "sed"}, r"^ci_unit='sed': must be one of 'seed', 'fold'$"),
    "max_cache_gb_str": ({"max_cache_gb": "5"}, r"^max_cache_gb='5': must be a number, not a str$"),
}


@pytest.mark.parametrize("case", list(API_TYPES))
def test_api_argument_types_refused_in_one_line(tmp_path, case):
    import ppgbench_pl as pb
    from ppgbench_pl.errors import ConfigError

    kwargs, pattern = API_TYPES[case]
    args = {"dataset": "synthetic", "tasks": ["synthetic-hr"], "controls": (), "output_dir": tmp_path / "run",
            "root": str(tmp_path / "data"), "progress": False, "seeds": [42], "folds": [0], **kwargs}
    with pytest.raises(ConfigError) as info:
        pb.evaluate("small_cnn", **args)
    message = str(info.value)
    assert re.search(pattern, message) and "\n" not in message, message
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()
