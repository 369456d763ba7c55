import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.messages import one_line
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
# One config language: every top-level config parses under both commands.
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
TINY = ["--data.init_args.synthetic_subjects", "8", "--data.init_args.synthetic_windows", "4",
        "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0,1]", "--progress", "false"]
# With 8 subjects a test fold of the rare stiffness class can hold one class only (not evaluable).
TASKS = ["--data.init_args.tasks", "[synthetic-hr, synthetic-activity, synthetic-age]"]


def quickstart(tmp_path, *extra):
    return ["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--output_dir", str(tmp_path / "run"),
            "--data.init_args.root", str(tmp_path / "data"), *TINY, *TASKS, *extra]


@pytest.mark.parametrize("command", ["fit", "benchmark"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_parses(config, capsys, command):
    code, out, err = run_cli([command, "--config", str(config), "--print_config"], capsys)
    assert code == 0, err
    assert "class_path" in out and "trainer:" in out


def test_configs_stack(capsys):
    code, out, _ = run_cli(["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--config",
                            str(ROOT / "configs/regime_linear.yaml"), "--print_config"], capsys)
    assert code == 0 and "results/regime_linear" in out


def test_quickstart_runs_writes_records_and_resumes(tmp_path, capsys):
    code, out, err = run_cli(quickstart(tmp_path), capsys)
    assert code == 0, err
    run = tmp_path / "run"
    summary = pd.read_csv(run / "summary.csv")
    models = set(summary["model"])
    assert {"small_cnn", "prv_published"} <= models and all(m.startswith("constant") for m in models - {
        "small_cnn", "prv_published"})  # one baseline per task view (the CNN at 64 Hz, PRV at 100 Hz)
    assert set(summary["task"]) == {"synthetic-hr", "synthetic-activity", "synthetic-age"}
    assert {"metric", "mean", "ci_low", "ci_high", "n_folds", "n_seeds"} <= set(summary.columns)
    records = [json.loads(p.read_text()) for p in run.glob("jobs/*/results.json")]
    assert len(records) == 2 * 3 * 2 and all(r["status"] == "ok" for r in records)
    status = json.loads((run / "status.json").read_text())
    assert {k: status[k] for k in ("completed", "failed", "planned", "complete", "records_in_folder")} == {
        "completed": 12, "failed": 0, "planned": 12, "complete": True, "records_in_folder": 12}
    assert status["this_command"] == {"planned": 12, "completed": 12, "skipped": 0, "failed": 0}
    assert "12 jobs run" in out
    parameters = json.loads((run / "run.json").read_text())["parameters"]
    # the model under test is counted as built, not after a regime froze it (issue 10)
    assert parameters["prv_published"] == {"total": 0, "trainable": 0}
    assert parameters["small_cnn"]["total"] > 10_000 and parameters["small_cnn"]["trainable"] == \
        parameters["small_cnn"]["total"]
    code, out, err = run_cli(quickstart(tmp_path), capsys)
    assert code == 0 and "0 jobs run, 12 already done" in out, err


def test_a_different_config_is_refused_in_the_same_run_folder(tmp_path, capsys):
    assert run_cli(quickstart(tmp_path), capsys)[0] == 0
    code, _, err = run_cli(quickstart(tmp_path, "--data.init_args.synthetic_seed", "7"), capsys)
    assert code == 2 and "different config" in err and err.count("\n") == 1


def test_wandb_offline_logs_go_under_the_default_output_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.chdir(tmp_path)
    args = ["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--data.init_args.root", str(tmp_path / "data"),
            *TINY, "--data.init_args.tasks", "[synthetic-hr]", "--controls", "[]"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert list((tmp_path / "results/quickstart/wandb").glob("offline-run-*/run-*.wandb"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "results"]


@pytest.mark.parametrize(("override", "message"), [
    (["--data.init_args.tasks", "[synthetic-foo]"], "unknown task 'synthetic-foo'"),
    (["--data.init_args.dataset", "nope"], "unknown dataset 'nope'"),
    (["--data.init_args.tasks", "[dalia-hr]"], "task 'dalia-hr' belongs to dataset 'dalia', not 'synthetic'"),
    (["--model.init_args.encoder", "ppgbench_pl.encoders.cnn.NoSuchEncoder"], "NoSuchEncoder"),
    (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.NoSuchRegime}]"], "NoSuchRegime"),
    (["--trainer.callbacks", "[]"], "no regime configured"),
    (["--model.init_args.encoder.init_args.embed_dimm", "32"], "'embed_dimm' is not accepted; did you mean 'embed_dim'?"),
    (["--trainer.callbacks.init_args.logistic_solver", "batched"], "'logistic_solver' is not accepted"),  # removed
    (["--data.init_args.synthetic_subjects", "4"], "at least n_folds=5 subjects"),
    (["--data.init_args.dataset", "dalia", "--data.init_args.tasks", "[dalia-hr]"], "ppgbench preprocess dalia"),
])
def test_bad_config_gives_one_line_and_writes_nothing(tmp_path, capsys, override, message):
    code, _, err = run_cli(quickstart(tmp_path, *override), capsys)
    assert code == 2
    assert message in err and err.strip().count("\n") == 0, err
    assert not (tmp_path / "run").exists()


def test_mismatched_label_count_is_one_line(tmp_path, capsys):
    assert run_cli(quickstart(tmp_path), capsys)[0] == 0
    bad = tmp_path / "data/fs_64/Synthetic/S03/hr.npy"
    np.save(bad, np.load(bad)[:-1])
    code, _, err = run_cli(quickstart(tmp_path, "--output_dir", str(tmp_path / "run2")), capsys)
    assert code == 2 and "S03/hr.npy: 3 labels for 4 windows" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "run2").exists()


def test_task_with_fewer_than_five_groups(tmp_path, capsys):
    assert run_cli(quickstart(tmp_path), capsys)[0] == 0
    for group in ("S01", "S02", "S03", "S04"):
        path = tmp_path / f"data/fs_64/Synthetic/{group}/age.npy"
        np.save(path, np.full(4, np.nan, dtype=np.float32))
    code, _, err = run_cli(quickstart(tmp_path, "--output_dir", str(tmp_path / "run3")), capsys)
    assert code == 2 and "task 'synthetic-age' has 4 groups with valid labels" in err
    assert not (tmp_path / "run3").exists()


def test_list_shows_every_task(capsys):
    code, out, _ = run_cli(["list"], capsys)
    assert code == 0
    assert "26 benchmark tasks (17 primary, 9 secondary)" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("ecsmp-sds-subject"))
    assert line.split()[1:4] == ["classification", "subject", "primary"]


def test_top_level_help_lists_every_command(capsys):
    from ppgbench_pl.cli import COMMANDS

    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0
    listed = [ln.split()[0] for ln in out.splitlines() if ln.startswith("  ") and ln.split()]
    assert listed == list(COMMANDS)
    assert {"fit", "benchmark", "list", "download", "preprocess", "report", "init"} <= set(listed)


@pytest.mark.parametrize(("typo", "meant"), [("lisst", "list"), ("fitt", "fit"), ("benchmarc", "benchmark"),
                                             ("reprot", "report")])
def test_an_unknown_command_gets_a_did_you_mean(capsys, typo, meant):
    code, out, err = run_cli([typo], capsys)
    assert code == 2 and not out
    assert f"did you mean '{meant}'" in err and len(err.strip().splitlines()) == 1, err


def test_fit_and_benchmark_help_show_the_same_options(capsys):
    helps = {}
    for command in ("fit", "benchmark"):
        code, out, _ = run_cli([command, "--help"], capsys)
        assert code == 0
        helps[command] = sorted(set(re.findall(r"--[\w.]+", out)))
    assert helps["fit"] == helps["benchmark"]
    for option in ("--matrix.encoders", "--controls", "--executor", "--wandb", "--allow_code_change"):
        assert option in helps["fit"]


def test_one_line_prefers_our_message():
    nested = ("Parser key \"data\":\n  Does not validate against any of the types in typing.Optional[X]:\n"
              "    - Problem with given class_path 'ppgbench_pl.datamodules.PPGDataModule':\n"
              "      - unknown task 'x'; did you mean y?\n"
              "    - Expected a <class 'NoneType'>. Got value: {}")
    assert one_line(nested) == "data: unknown task 'x'; did you mean y?"


def test_a_second_fit_in_one_process_logs_with_its_own_wandb_mode(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = ["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--data.init_args.root", str(tmp_path / "data"),
            *TINY, "--data.init_args.tasks", "[synthetic-hr]", "--controls", "[]"]
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert run_cli([*base, "--output_dir", "first"], capsys)[0] == 0
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert run_cli([*base, "--output_dir", "second"], capsys)[0] == 0
    assert not (tmp_path / "first" / "wandb").exists()
    assert list((tmp_path / "second/wandb").glob("offline-run-*/run-*.wandb"))


def test_the_help_cache_is_built_once_and_keyed_on_what_the_help_depends_on(tmp_path, monkeypatch):
    from ppgbench_pl import cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = []

    def fake_build(args, run=True):
        built.append(list(args))
        print(f"usage: ppgbench {args[0]} (built {len(built)})")

    monkeypatch.setattr(cli, "build_cli", fake_build)
    first = cli.cached_help("fit")
    assert first == cli.cached_help("fit") == "usage: ppgbench fit (built 1)\n" and built == [["fit", "--help"]]
    monkeypatch.setenv("COLUMNS", "55")  # another terminal width: another text
    assert cli.cached_help("fit") == "usage: ppgbench fit (built 2)\n"
    assert len(list((tmp_path / "ppgbench").glob("help-fit-*.txt"))) == 2


def test_a_mistyped_top_level_flag_gets_a_did_you_mean_before_lightning(tmp_path, capsys):
    """``--outptu_dir`` is refused with the close flag; with the help cached, before Lightning is built."""
    from unittest import mock

    from ppgbench_pl.cli import cached_help, main

    cached_help("fit")

    with mock.patch("ppgbench_pl.cli.build_cli", side_effect=AssertionError("built the LightningCLI")):
        with pytest.raises(SystemExit) as info:
            main(["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--outptu_dir", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--outptu_dir" in err and "did you mean '--output_dir'" in err


def test_a_mistyped_flag_is_refused_with_a_did_you_mean_by_the_parser_too(capsys):
    from ppgbench_pl.messages import unknown_flags

    assert unknown_flags("unrecognized arguments: --outptu_dir x", ["--output_dir", "--wandb"]).endswith(
        "--outptu_dir: did you mean '--output_dir'?")
    assert unknown_flags("unrecognized arguments: --zzz", ["--output_dir"]) == "unrecognized arguments: --zzz"
