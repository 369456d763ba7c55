"""The bad-input corpus (issue 12 "Done when", issue 11 items 8 and 9), end to end through ``ppgbench``.

Every case is (command or config or file mutation, expected exit status, a regex that must appear on
stderr). A refused case exits non-zero with at most two lines on stderr and no traceback; a case that
is handled (a damaged cache entry, a leftover lock, a narrower rerun) exits 0 and its correct behaviour
is asserted. Runs are in-process (``ppgbench_pl.cli.main``) on a tiny synthetic suite; the few that need
a second process (concurrent runs) start one.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tests.benchmark.helpers import LAUNCH, record_files, records, status, write_config
from tests.benchmark.helpers import tree as all_files
from tests.cli_helpers import run_cli
from tests.encoders.test_checkpoint_safety import payloads, write_hostile

REPO = Path(__file__).resolve().parents[2]
CNN = {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}
LINEAR = {"class_path": "ppgbench_pl.regimes.LinearRegime"}
PRV = "{class_path: ppgbench_pl.encoders.prv.PublishedPRVEncoder}"
ENC = "--model.init_args.encoder.init_args."


def custom(module: str = "tests.encoders.test_custom.TinyConvNet", **init: Any) -> dict[str, Any]:
    """A CustomEncoder block around ``module`` (random weights unless a checkpoint is given)."""
    args: dict[str, Any] = {"module": {"class_path": module}, "sampling_rate": 64, "pooling": "mean",
                            "random_init": True, **init}
    return {"class_path": "ppgbench_pl.encoders.custom.CustomEncoder", "init_args": args}


def config(root: Path, out: Path, encoder: dict[str, Any] | None = None, tasks: list[str] | None = None,
           regimes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The tiny suite: one task, one seed, one fold, the linear probe, no controls, no W&B."""
    return {
        "output_dir": str(out),
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"encoder": encoder or CNN}},
        "controls": [],
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule",
                 "init_args": {"dataset": "synthetic", "root": str(root), "tasks": tasks or ["synthetic-hr"],
                               "seeds": [42], "folds": [0], "synthetic_subjects": 10,
                               "synthetic_windows": 4}},
        "trainer": {"accelerator": "cpu", "devices": 1, "callbacks": regimes or [LINEAR]},
        "wandb": "off",
        "progress": False,
    }


#: Every stderr line the corpus saw (the README check at the end compares its Troubleshooting lines).
SEEN: list[str] = []


def check(result: tuple[int, str, str], code: int, pattern: str) -> str:
    """The corpus rule: the expected status, at most two stderr lines, no traceback, ``pattern`` on stderr."""
    got, out, err = result
    assert got == code, f"exit {got}, expected {code}\nstdout: {out[-1500:]}\nstderr: {err[-3000:]}"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) <= 2, f"{len(lines)} lines on stderr:\n{err[-3000:]}"
    assert re.search(pattern, err, re.M), f"{pattern!r} not on stderr:\n{err}\nstdout: {out[-1500:]}"
    SEEN.extend(lines)
    return err


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A processed root, a finished one-job run folder and its config, shared by the module."""
    return make_base(tmp_path_factory, "bad_input")


def make_base(tmp_path_factory: pytest.TempPathFactory, name: str) -> dict[str, Path]:
    """A processed root, a one-job run folder with a cache of its own, and its config (a module fixture's)."""
    folder = tmp_path_factory.mktemp(name)
    root, out = folder / "data", folder / "run"
    path = write_config(folder / "config.yaml", config(root, out))
    with pytest.MonkeyPatch.context() as patch:  # its own cache: a module fixture runs before the per-test one
        patch.setenv("PPGBENCH_CACHE_DIR", str(folder / "cache"))
        from tests.benchmark.helpers import run

        assert run(["--config", str(path)], "fit") == 0
    return {"folder": folder, "root": root, "run": out, "config": path}


def fit(capsys: pytest.CaptureFixture[str], *args: str, command: str = "fit") -> tuple[int, str, str]:
    return run_cli([command, *args], capsys)


def tree(path: Path) -> dict[str, int]:
    """Files under ``path`` with their mtimes, lock files aside (taking a lock writes its holder into it)."""
    return {name: mtime for name, mtime in all_files(path).items() if not name.startswith(".locks/")
            and "/.locks/" not in name}


def no_ok_record(out: Path) -> bool:
    """No job of ``out`` was recorded as ok (a failed record, with its reason, is allowed)."""
    return all(r["status"] != "ok" for r in records(out).values()) if out.exists() else True


def copy_run(base: dict[str, Path], tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(base["run"], out)
    return out


def copy_root(base: dict[str, Path], tmp_path: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(base["root"], root)
    return root


# -- 1. settings refused before anything is written (issue 12 items 9, 10; issue 11 item 9) ------------------
#: (extra arguments, exit status, stderr regex); each runs into a fresh output folder that must stay absent.
REFUSED: dict[str, tuple[list[str], int, str]] = {
    "n_inner_folds_1": (["--data.init_args.n_inner_folds", "1"], 2, r"n_inner_folds"),
    "seeds_empty": (["--data.init_args.seeds", "[]"], 2, r"seeds"),
    "folds_empty": (["--data.init_args.folds", "[]"], 2, r"folds"),
    "tasks_empty": (["--data.init_args.tasks", "[]"], 2, r"task"),
    "seeds_duplicate": (["--data.init_args.seeds", "[42, 42]"], 2, r"duplicate"),
    "fold_out_of_range": (["--data.init_args.folds", "[7]"], 2, r"fold"),
    "fold_negative": (["--data.init_args.folds", "[-1]"], 2, r"fold"),
    "unknown_task": (["--data.init_args.tasks", "[synthetic-hrr]"], 2, r"synthetic-hrr"),
    "unknown_dataset": (["--data.init_args.dataset", "dalai"], 2, r"dalai"),
    "only_regimes_empty": (["--only_regimes", "[]"], 2, r"--only_regimes"),
    "only_encoders_empty": (["--only_encoders", "[]"], 2, r"--only_encoders"),
    "only_encoders_unknown": (["--only_encoders", "[small_cnnn]"], 2, r"small_cnnn"),
    "unknown_regime_name": (["--only_regimes", "[lineer]"], 2, r"lineer"),
    "unknown_regime_class": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.LinearRegim}]"], 2,
                             r"LinearRegim"),
    "duplicate_controls": (["--controls", f"[{PRV}, {PRV}]"], 2, r"unique"),
    "ci_unit_typo": (["--ci_unit", "sed"], 2, r"ci_unit"),
    "precision_typo": (["--trainer.precision", "bf16-mixd"], 2,  # README, Troubleshooting (issue 18)
                       r"trainer\.precision: 'bf16-mixd' is not an accepted value \(choices: .*\); did you mean"),
    "encoder_bare_name": (["--model.init_args.encoder", "papagei_x"], 2,  # README, Troubleshooting (issue 18)
                          r"model\.encoder: 'papagei_x' is neither a class path nor a registered encoder name"),
    "workers_0": (["--executor", "process", "--executor.init_args.workers", "0"], 2, r"workers"),
    "workers_negative": (["--executor", "process", "--executor.init_args.workers", "-2"], 2, r"workers"),
    "workers_0_short": (["--executor", "process", "--executor.workers", "0"], 2, r"workers"),
    "max_cache_gb_0": (["--max_cache_gb", "0"], 2, r"--max_cache_gb"),
    "max_cache_gb_tiny": (["--max_cache_gb", "0.0000001"], 2,
                          r"embedding cache for encoder small_cnn, dataset synthetic, fs 64.0 would take "
                          r"[\d.e-]+ GB, above the cap of 1e-07 GB \(--max_cache_gb\)"),
    "wandb_choice": (["--wandb", "sometimes"], 2, r"wandb"),
    "fast_dev_run": (["--trainer.fast_dev_run", "true"], 2,
                     r"trainer\.fast_dev_run=True: fast_dev_run is set by each regime's search budget "
                     r"\(the regime's init_args\); remove it"),
    "max_epochs": (["--trainer.max_epochs", "3"], 2, r"trainer\.max_epochs"),
    "ckpt_path": (["--ckpt_path", "/nonexistent.ckpt"], 2, r"--ckpt_path"),
    "precision_nonsense": (["--trainer.precision", "17"], 2, r"precision"),
    "unknown_option": (["--data.init_args.seedz", "[1]"], 2, r"seedz.*did you mean 'seeds'"),
    "unknown_top_option": (["--outptu_dir", "x"], 2, r"outptu_dir"),
    "encoder_typo_option": ([ENC + "widht", "32"], 2, r"widht"),
    "missing_config": (["--config", "/nonexistent/config.yaml"], 2, r"--config /nonexistent/config\.yaml: no such file"),
    "config_is_a_folder": (["--config=/tmp"], 2, r"--config /tmp: is a folder, not a YAML file"),
    "batch_size_0": (["--data.init_args.batch_size", "0"], 2, r"batch_size"),
    "synthetic_subjects_1": (["--data.init_args.synthetic_subjects", "1"], 2, r"synthetic_subjects|subjects"),
    "seed_everything_text": (["--seed_everything", "abc"], 2, r"seed_everything"),
    "root_is_a_file": (["--data.init_args.root", "/etc/hostname"], 2,
                       r"data\.root /etc/hostname: is a file, not a folder of processed trees"),
}


#: Refused only once the data is read (the cache estimate needs the windows): the folder exists but
#: holds no record, and the corrected command runs in it.
LATE = {"max_cache_gb_tiny"}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_before_writing(base, tmp_path, capsys, case):
    args, code, pattern = REFUSED[case]
    out = tmp_path / "new_run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), *args), code, pattern)
    if case not in LATE:
        assert not out.exists()
        return
    assert not record_files(out)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0, r"^")
    assert len(record_files(out)) == 1


@pytest.mark.parametrize("case", ["n_inner_folds_1", "seeds_empty", "ci_unit_typo", "duplicate_controls",
                                  "workers_0"])
def test_refused_leaves_an_existing_folder_untouched(base, tmp_path, capsys, case):
    args, code, pattern = REFUSED[case]
    out = copy_run(base, tmp_path)
    before = tree(out)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), *args), code, pattern)
    assert tree(out) == before


#: (config file text, exit status, stderr regex): a config file that cannot be a config.
CONFIG_FILES: dict[str, tuple[str, int, str]] = {
    "yaml_syntax": ("model: {class_path: [unclosed\n", 2,
                    r"a --config file is not valid YAML: while parsing a flow sequence at line 1, column 21 did "
                    r"not find expected ',' or '\]' at line 2, column 1$"),
    "yaml_a_list": ("- 1\n- 2\n", 2, r"Unexpected config: - 1"),
    "unknown_top_key": ("outptu_dir: x\n", 2, r"outptu_dir"),
    "model_not_a_task": ("model: {class_path: collections.OrderedDict}\n", 2, r"model|OrderedDict"),
}


@pytest.mark.parametrize("case", list(CONFIG_FILES))
def test_bad_config_file(base, tmp_path, capsys, monkeypatch, case):
    text, code, pattern = CONFIG_FILES[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(text)
    check(fit(capsys, "--config", str(base["config"]), "--config", str(tmp_path / "config.yaml"),
              "--output_dir", str(tmp_path / "run")), code, pattern)
    assert not (tmp_path / "run").exists() and not (tmp_path / "x").exists()


CLI_ONLY: dict[str, tuple[list[str], int, str]] = {
    "unknown_command": (["fti"], 2, r"unknown command 'fti'; did you mean 'fit'\?"),
    "benchmark_seeds_empty": (["benchmark", "--data.init_args.seeds", "[]"], 2, r"seeds"),
    "preprocess_fs_0": (["preprocess", "bidmc", "--fs", "0"], 2, r"--fs 0: a target rate must lie within 10-2000 Hz"),
    "preprocess_fs_nan": (["preprocess", "bidmc", "--fs", "nan"], 2, r"--fs nan: a target rate"),
    "preprocess_fs_inf": (["preprocess", "bidmc", "--fs", "inf"], 2, r"--fs inf: a target rate"),
    "preprocess_fs_negative": (["preprocess", "bidmc", "--fs", "-64"], 2, r"--fs -64: a target rate"),
    "preprocess_fs_1": (["preprocess", "bidmc", "--fs", "64", "1"], 2, r"--fs 1: a target rate"),
    "preprocess_fs_100000": (["preprocess", "bidmc", "--fs", "100000"], 2, r"--fs 100000: a target rate"),
    "preprocess_fs_text": (["preprocess", "bidmc", "--fs", "64Hz"], 2,
                           r"^ppgbench: error: preprocess: argument --fs: invalid float value: '64Hz'"),
    "preprocess_no_fs": (["preprocess", "bidmc"], 2, r"required: --fs"),
    "preprocess_unknown_dataset": (["preprocess", "dalai", "--fs", "64"], 2, r"dalai"),
    "download_unknown_dataset": (["download", "dalai"], 2, r"dalai"),
    "download_unknown_option": (["download", "bidmc", "--stall-tmeout", "5"], 2,
                                r"unrecognized arguments: --stall-tmeout"),
    "report_missing_folder": (["report", "/nonexistent/run"], 2, r"no such run folder"),
    "report_alpha": (["report", "/nonexistent/run", "--alpha", "2"], 2, r"--alpha"),
}


@pytest.mark.parametrize("case", list(CLI_ONLY))
def test_cli_refusals(base, tmp_path, capsys, monkeypatch, case):
    args, code, pattern = CLI_ONLY[case]
    monkeypatch.chdir(tmp_path)
    if args[0] == "benchmark":
        args = [args[0], "--config", str(base["config"]), "--output_dir", str(tmp_path / "run"), *args[1:]]
    if args[0] == "preprocess":
        args = [*args, "--raw-root", str(tmp_path / "raw"), "--output", str(tmp_path / "out")]
    if args[0] == "download":
        args = [*args, "--raw-root", str(tmp_path / "raw")]
    check(run_cli(args, capsys), code, pattern)
    assert not (tmp_path / "run").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("fs", [9.99, 2000.5])
def test_preprocess_refuses_the_rates_the_encoders_refuse(tmp_path, capsys, fs):
    """Just outside the encoders' range: refused in one line before any raw file is read."""
    from ppgbench_pl.encoders.custom_settings import check_sampling_rate
    from ppgbench_pl.errors import ConfigError

    with pytest.raises(ConfigError):
        check_sampling_rate(fs)
    out = tmp_path / "processed"
    check(run_cli(["preprocess", "bidmc", "--raw-root", str(tmp_path / "raw"), "--fs", str(fs),
                   "--output", str(out)], capsys), 2, rf"--fs {fs:g}: a target rate must lie within 10-2000 Hz")
    assert not out.exists()


@pytest.mark.parametrize("fs", [10.0, 2000.0])
def test_preprocess_takes_the_rates_the_encoders_take(tmp_path, capsys, fs):
    """At the range's ends: past the rate check (it then stops at the missing raw data instead)."""
    from ppgbench_pl.encoders.custom_settings import check_sampling_rate

    assert check_sampling_rate(fs) == fs
    code, _, err = run_cli(["preprocess", "bidmc", "--raw-root", str(tmp_path / "raw"), "--fs", str(fs),
                            "--output", str(tmp_path / "processed")], capsys)
    assert code == 2 and "target rate" not in err and err.strip(), err


# -- 2. your own model: rates, options, checkpoints, output shapes (issue 11 items 8, 9) ----------------------
CUSTOM: dict[str, tuple[dict[str, Any], list[str], int, str]] = {
    "rate_100000": ({}, [ENC + "sampling_rate", "100000"], 2,
                    r"tiny_conv_net \(random init\): sampling_rate 100000 Hz is outside 10-2000 Hz \(below 10 Hz the "
                    r"pulse wave is not resolved; no PPG dataset or model here runs above 2 kHz\)"),
    "rate_1": ({}, [ENC + "sampling_rate", "1"], 2, r"sampling_rate 1"),
    "rate_0": ({}, [ENC + "sampling_rate", "0"], 2, r"sampling_rate"),
    "rate_nan": ({}, [ENC + "sampling_rate", "nan"], 2, r"sampling_rate"),
    "rate_64Hz": ({}, [ENC + "sampling_rate", "64Hz"], 2,
                  r"model\.encoder\.sampling_rate: Expected a <class 'float'>\. Got value: 64Hz"),
    "widht": ({}, [ENC + "module.init_args.widht", "32"], 2,
              r"model\.encoder\.module: Option 'widht' is not accepted; did you mean 'width'\?"),
    "checkpoint_null": ({"random_init": False}, [ENC + "checkpoint", "null"], 2, r"checkpoint"),
    "checkpoint_None": ({"random_init": False}, [ENC + "checkpoint", "None"], 2, r"checkpoint"),
    "checkpoint_missing_file": ({"random_init": False}, [ENC + "checkpoint", "/nonexistent/w.pt"], 2,
                                r"/nonexistent/w\.pt"),
    "no_checkpoint": ({"random_init": False}, [], 2, r"checkpoint"),
    "module_unknown": ({}, [ENC + "module", "{class_path: tests.bad_input.helpers.NoSuchNet}"], 2, r"NoSuchNet"),
    "input_shape_choice": ({}, [ENC + "input_shape", "BTC"], 2, r"input_shape"),
    "pooling_choice": ({}, [ENC + "pooling", "avg"], 2, r"pooling"),
    "wrong_output_shape": ({"module": {"class_path": "tests.bad_input.helpers.FlatNet"}, "pooling": "none",
                            "random_init": False, "checkpoint": "FLATNET"}, [], 2,
                           r"flat_net: the module's output does not fit the settings: .* with input_shape: BT it "
                           r"gives \[B, 4\] embeddings, so set input_shape: BT"),
    # NaN embeddings stop the run at the first embedding batch (issue 18), naming the encoder and the fix
    "nan_embeddings": ({"module": {"class_path": "tests.bad_input.helpers.NaNNet"}, "pooling": "none"}, [],
                       2, r"^ppgbench: error: encoder na_n_net \(random init\): embeddings of batch 0 on synthetic at "
                          r"64 Hz contain NaN/inf in 40 of 40 rows; check its checkpoint"),
}


@pytest.mark.parametrize("case", list(CUSTOM))
def test_custom_encoder(base, tmp_path, capsys, case):
    init, args, code, pattern = CUSTOM[case]
    out = tmp_path / "run"
    block = custom(**{k: v for k, v in init.items() if k != "module"})
    if "module" in init:
        block["init_args"]["module"] = init["module"]
    if init.get("checkpoint") == "FLATNET":
        from tests.bad_input.helpers import FlatNet

        torch.save(FlatNet().state_dict(), tmp_path / "flat.pt")
        block["init_args"]["checkpoint"] = str(tmp_path / "flat.pt")
    path = write_config(tmp_path / "model.yaml", config(base["root"], out, encoder=block))
    check(fit(capsys, "--config", str(path), *args), code, pattern)
    assert no_ok_record(out)


def test_published_model_without_checkpoint_refuses(base, tmp_path, capsys):
    """README, Troubleshooting: the first message."""
    check(fit(capsys, "--config", str(REPO / "configs/quickstart.yaml"),
              "--config", str(REPO / "configs/encoders/papagei_p.yaml"), "--output_dir", str(tmp_path / "run")),
          2, r"papagei_p: no checkpoint given, so its weights would be random; get papagei_p\.pt from Zenodo "
             r"record 13983110 \(https://zenodo\.org/records/13983110\) and set checkpoint: <path> in the "
             r"encoder's init_args, or set random_init: true to evaluate it untrained \(reported as "
             r"'papagei_p \(random init\)'\)")
    assert not (tmp_path / "run").exists()


# -- 3. hostile checkpoints through a config (issue 12 item 1) ------------------------------------------
HOSTILE_ENCODERS = {
    "custom": custom(random_init=False),
    "small_cnn": {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"},
    "pulseppg": {"class_path": "ppgbench_pl.encoders.pulseppg.PulsePPGEncoder",
                 "init_args": {"base_filters": 8, "n_block": 2}},
    "sigmappg": {"class_path": "ppgbench_pl.encoders.sigmappg.SigmaPPGEncoder"},
    "papagei_p": {"class_path": "ppgbench_pl.encoders.papagei.PaPaGeiPEncoder"},
    "papagei_s": {"class_path": "ppgbench_pl.encoders.papagei.PaPaGeiSEncoder"},
    "anyppg": {"class_path": "ppgbench_pl.encoders.anyppg.AnyPPGEncoder"},
    "moment_small": {"class_path": "ppgbench_pl.encoders.moment.MomentSmallEncoder"},
}


@pytest.mark.parametrize("fmt", ["torch", "pickle"])
@pytest.mark.parametrize("name", list(HOSTILE_ENCODERS))
def test_hostile_checkpoint_never_runs(base, tmp_path, capsys, name, fmt):
    marker = tmp_path / "PAYLOAD_RAN"
    offender, payload = payloads(marker)["os.system"]
    weights = tmp_path / ("evil.pt" if fmt == "torch" else "evil.pkl")
    write_hostile(weights, fmt, payload, {"w": torch.zeros(2)})
    block = copy.deepcopy(HOSTILE_ENCODERS[name])
    block.setdefault("init_args", {})["checkpoint"] = str(weights)
    out = tmp_path / "run"
    path = write_config(tmp_path / "model.yaml", config(base["root"], out, encoder=block))
    check(fit(capsys, "--config", str(path)), 2,
          rf"{re.escape(str(weights))}: refused to load: it references {re.escape(offender)}")
    assert not marker.exists() and not out.exists()


# -- 4. one folder, one set of numbers (issue 12 items 2, 3) ---------------------------------------------
IDENTITY: dict[str, list[str]] = {
    "precision_bf16": ["--trainer.precision", "bf16-mixed"],
    "precision_64": ["--trainer.precision", "64-true"],
    "deterministic": ["--trainer.deterministic", "true"],
    "n_inner_folds": ["--data.init_args.n_inner_folds", "3"],
    "synthetic_seed": ["--data.init_args.synthetic_seed", "1"],
    "encoder_seed": [ENC + "seed", "1"],
}


@pytest.mark.parametrize("case", list(IDENTITY))
def test_identity_change_is_refused(base, tmp_path, capsys, case):
    out = copy_run(base, tmp_path)
    before = tree(out)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), *IDENTITY[case]), 2,
          r"different config or data")
    assert tree(out) == before


def test_summary_covers_the_folder(base, tmp_path, capsys):
    out = copy_run(base, tmp_path)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.folds",
              "[0, 1]"), 0, r"^")
    wide = pd.read_csv(out / "summary.csv")
    assert set(wide["n_folds"]) == {2}
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0, r"^")
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), wide)
    folder = status(out)
    assert folder["complete"] and folder["planned"] == 2 and folder["completed"] == 2


# -- 5. damaged run folders (issue 12 items 4, 10, 12) ---------------------------------------------------
def _job(out: Path) -> Path:
    return record_files(out)[0].parent


def _cache_npy(out: Path) -> Path:
    return sorted((out / "embeddings").glob("*.npy"))[0]


def _replace_by_file(out: Path) -> None:
    shutil.rmtree(out)
    out.write_text("not a folder")


FOLDER: dict[str, tuple[Callable[[Path], object], int, str]] = {
    "run_json_not_json": (lambda out: (out / "run.json").write_text("{not json"), 2, r"run\.json"),
    "run_json_a_list": (lambda out: (out / "run.json").write_text("[]"), 2, r"run\.json"),
    "run_json_binary": (lambda out: (out / "run.json").write_bytes(b"\xff\xfe\x00"), 2, r"run\.json"),
    "run_json_empty": (lambda out: (out / "run.json").write_text(""), 2, r"run\.json"),
    "output_is_a_file": (lambda out: _replace_by_file(out), 2, r"not a folder"),
}


@pytest.mark.parametrize("case", list(FOLDER))
def test_damaged_folder_is_refused(base, tmp_path, capsys, case):
    damage, code, pattern = FOLDER[case]
    out = copy_run(base, tmp_path)
    damage(out)
    before = tree(out) if out.is_dir() else out.read_bytes()
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), code, pattern)
    assert (tree(out) if out.is_dir() else out.read_bytes()) == before


def test_output_under_a_file_is_refused(base, tmp_path, capsys):
    (tmp_path / "taken").write_text("x")
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(tmp_path / "taken" / "run")), 2,
          re.escape(str(tmp_path / "taken")))


def test_output_where_no_folder_can_be_made_is_refused(base, tmp_path, capsys):
    """Even root cannot make a folder in /proc: the unwritable output folder that every user can try."""
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", "/proc/ppgbench-run"), 2,
          r"--output_dir /proc/ppgbench-run: (cannot be made|/proc is not writable)")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_output_not_writable_is_refused(base, tmp_path, capsys):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o500)
    try:
        check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(parent / "run")), 2,
              re.escape(str(parent)))
    finally:
        parent.chmod(0o700)


REPAIRED: dict[str, Callable[[Path], object]] = {
    "record_corrupt": lambda out: (_job(out) / "results.json").write_text('{"model": '),
    "record_missing_predictions": lambda out: (_job(out) / "predictions_repeat0.npz").unlink(),
    "summary_deleted": lambda out: (out / "summary.csv").unlink(),
    "summary_corrupt": lambda out: (out / "summary.csv").write_text("garbage,\n\x00\x01"),
    "status_corrupt": lambda out: (out / "status.json").write_text("{"),
    "leftover_working_folder": lambda out: (out / "jobs" / (_job(out).name + ".working")).mkdir(),
    "leftover_lock_file": lambda out: (out / ".locks" / "jobs" / (_job(out).name + ".lock")).write_text("4242"),
}


@pytest.mark.parametrize("case", list(REPAIRED))
def test_damaged_folder_is_repaired_by_a_rerun(base, tmp_path, capsys, case):
    out = copy_run(base, tmp_path)
    reference = records(base["run"])
    REPAIRED[case](out)
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0, r"^")
    assert set(records(out)) == set(reference)
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), pd.read_csv(base["run"] / "summary.csv"))
    assert status(out)["complete"]


CACHE: dict[str, Callable[[Path], object]] = {
    "cache_truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "cache_flipped_byte": lambda p: p.write_bytes(p.read_bytes()[:-1] + bytes([p.read_bytes()[-1] ^ 0xFF])),
    "cache_empty": lambda p: p.write_bytes(b""),
    "cache_meta_corrupt": lambda p: p.with_suffix(".json").write_text("{"),
}


@pytest.mark.parametrize("case", list(CACHE))
def test_damaged_cache_entry_is_recomputed(base, tmp_path, capsys, case, monkeypatch):
    out = copy_run(base, tmp_path)
    shutil.rmtree(out / "jobs")  # the job runs again and needs its embeddings
    good = np.load(_cache_npy(base["run"]))
    shared = _cache_npy(base["run"]).resolve()  # the run folder links the shared cache's entry: damage that
    monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(shared.parent))
    CACHE[case](shared)
    err = check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0, r"^")
    assert "cache" in err.lower() or case == "cache_meta_corrupt", err
    assert np.array_equal(np.load(_cache_npy(out)), good)
    assert len(record_files(out)) == 1


# -- 6. damaged processed trees (issue 12 items 4, 6, 12) ------------------------------------------------
def _group(root: Path) -> Path:
    return sorted((root / "fs_64" / "Synthetic").glob("S*"))[0]


def _poke(name: str, value: float) -> Callable[[Path], object]:
    def damage(root: Path) -> None:
        path = _group(root) / name
        data = np.load(path)
        data.reshape(-1)[3] = value
        np.save(path, data)
    return damage


def _one_class(root: Path) -> None:
    for group in (root / "fs_64" / "Synthetic").glob("S*"):
        labels = np.load(group / "activity.npy")
        np.save(group / "activity.npy", np.zeros_like(labels))


TREE: dict[str, tuple[Callable[[Path], object], list[str], int, str]] = {
    "nan_window": (_poke("ppg.npy", math.nan), [], 2, r"ppg\.npy"),
    "inf_window": (_poke("ppg.npy", math.inf), [], 2, r"ppg\.npy"),
    "missing_ppg": (lambda root: (_group(root) / "ppg.npy").unlink(), [], 2, r"ppg\.npy"),
    "missing_group": (lambda root: shutil.rmtree(_group(root)), [], 2, r"S\d\d"),
    "truncated_ppg": (lambda root: (_group(root) / "ppg.npy").write_bytes(b"\x93NUMPY"), [], 2, r"ppg\.npy"),
    "corrupt_stats": (lambda root: (_group(root) / "stats.json").write_text("{"), [], 2, r"stats\.json"),
    # all-one-class labels: known from the data, so the job is recorded as not evaluable without training
    # (issue 18), never scored 1.0; the command evaluated nothing, so it fails (issue 30)
    "one_class_labels": (_one_class, ["--data.init_args.tasks", "[synthetic-activity]"], 2,
                         r"^not evaluable, recorded without training \(1 jobs, .*\): synthetic-activity seed 42 "
                         r"fold 0: every test label is class 0$"),
}


@pytest.mark.parametrize("case", list(TREE))
def test_damaged_tree_is_refused(base, tmp_path, capsys, case):
    damage, args, code, pattern = TREE[case]
    root = copy_root(base, tmp_path)
    damage(root)
    out = tmp_path / "run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.root",
              str(root), *args), code, pattern)
    assert no_ok_record(out)


def test_a_nan_label_loses_that_window_only(base, tmp_path, capsys):
    root = copy_root(base, tmp_path)
    _poke("hr.npy", math.nan)(root)
    out = tmp_path / "run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.root",
              str(root)), 0, r"^")
    (job,) = [p.parent for p in record_files(out)]
    result = json.loads((job / "results.json").read_text())["results"][0]
    with np.load(job / "predictions_repeat0.npz") as arrays:
        assert result["n_train_windows"] + len(arrays["y_true"]) == 39  # of 40


def test_a_changed_tree_is_not_served_stale_embeddings(base, tmp_path, capsys):
    """The windows' content is part of the run identity (and keys the cache): a hand-edited tree with the
    same marker is another dataset, so its folder refuses it instead of mixing or serving old embeddings."""
    root = copy_root(base, tmp_path)
    out = tmp_path / "run"
    args = ["--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.root", str(root)]
    check(fit(capsys, *args), 0, r"^embeddings: ")
    _poke("ppg.npy", 0.5)(root)
    check(fit(capsys, *args), 2, r"this run folder holds results of a different config or data "
                                 r"\(datasets\.synthetic differ\)")
    assert len(list((out / "embeddings").glob("*.npy"))) == 1
    fresh = ["--config", str(base["config"]), "--output_dir", str(tmp_path / "run2"), "--data.init_args.root",
             str(root)]
    check(fit(capsys, *fresh), 0, r"^embeddings: small_cnn on synthetic at 64 Hz: 40 windows")


# -- 7. report on damaged records (issue 12 items 10, 12) ------------------------------------------------
@pytest.fixture(scope="module")
def two_jobs(base: dict[str, Path]) -> Path:
    """A finished run of a window-level and a subject-level task (the report re-scores the latter)."""
    out = base["folder"] / "two_jobs"
    path = write_config(base["folder"] / "two_jobs.yaml",
                        config(base["root"], out, tasks=["synthetic-hr", "synthetic-age"]))
    from tests.benchmark.helpers import run

    assert run(["--config", str(path)], "fit") == 0
    return out


def _age(out: Path) -> Path:
    return next(p.parent for p in record_files(out) if "synthetic-age" in p.parent.name)


REPORT: dict[str, tuple[Callable[[Path], object], int, str]] = {
    "results_json_corrupt": (lambda out: (_age(out) / "results.json").write_text("{"), 0,
                             r"^ppgbench: warning: .*results\.json"),
    "all_results_corrupt": (lambda out: [p.write_text("[1, 2") for p in record_files(out)], 2,
                            r"no job records.*results\.json"),
    "npz_corrupt": (lambda out: (_age(out) / "predictions_repeat0.npz").write_bytes(b"PK\x03\x04junk"), 0,
                    r"^ppgbench: warning: .*predictions_repeat0\.npz: is not a readable \.npz file"),
    "npz_not_zip": (lambda out: (_age(out) / "predictions_repeat0.npz").write_text("hello"), 0,
                    r"^ppgbench: warning: .*predictions_repeat0\.npz"),
    "npz_missing": (lambda out: (_age(out) / "predictions_repeat0.npz").unlink(), 0,
                    r"^ppgbench: warning: .*predictions_repeat0\.npz: predictions file missing"),
    "run_json_corrupt": (lambda out: (out / "run.json").write_text("{"), 2, r"run\.json"),
    "no_jobs_folder": (lambda out: shutil.rmtree(out / "jobs"), 2, r"run folder|no job records"),
}


@pytest.mark.parametrize("case", list(REPORT))
def test_report_on_damaged_records(two_jobs, tmp_path, capsys, case):
    damage, code, pattern = REPORT[case]
    out = tmp_path / "run"
    shutil.copytree(two_jobs, out)
    damage(out)
    check(run_cli(["report", str(out), "-o", str(tmp_path / "report")], capsys), code, pattern)
    assert (tmp_path / "report" / "index.html").exists() == (code == 0)


# -- 8. interrupts and concurrent runs (issue 12 items 7, 8) -----------------------------------------------
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_says_so(base, tmp_path, capsys, signum, code):
    out = tmp_path / "run"
    regime = {"class_path": "tests.bad_input.helpers.SignalsItself", "init_args": {"signum": int(signum)}}
    path = write_config(tmp_path / "c.yaml", config(base["root"], out, regimes=[regime]))
    check(fit(capsys, "--config", str(path)), code,
          r"^interrupted after 0 of 1 jobs; run the same command to resume$")
    assert not record_files(out) and not status(out)["complete"]


def test_two_runs_on_one_folder(base, tmp_path, capsys, pinned_source):
    """A second process on the same folder while this one runs it: both succeed, each job once."""
    out = tmp_path / "run"
    cfg = config(base["root"], out, tasks=["synthetic-hr", "synthetic-age"])
    cfg["data"]["init_args"]["folds"] = [0, 1]
    path = write_config(tmp_path / "c.yaml", cfg)
    other = subprocess.Popen([sys.executable, "-c", LAUNCH, "fit", "--config", str(path)], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        mine = fit(capsys, "--config", str(path))
        _, err = other.communicate(timeout=120)
    finally:
        if other.poll() is None:
            other.kill()
    check(mine, 0, r"^")
    check((other.returncode, "", err), 0, r"^")
    assert len(record_files(out)) == 4 and status(out)["complete"]


def test_a_job_lock_held_by_a_stuck_process_is_reported(base, tmp_path, capsys, monkeypatch):
    """The waiting run names the holder (pid, age), then runs the job once the holder lets go."""
    import threading

    from ppgbench_pl import locks
    from ppgbench_pl.benchmark.job import job_lock_path

    out = copy_run(base, tmp_path)
    jid = _job(out).name
    shutil.rmtree(out / "jobs")
    monkeypatch.setattr(locks.file_lock.__wrapped__, "__defaults__", (True, 0.6))  # notices every 0.6 s
    held, release = threading.Event(), threading.Event()

    def stuck() -> None:
        with locks.file_lock(job_lock_path(out, jid)):
            held.set()
            release.wait(120)  # let go once the waiting run has asked (or after 2 min: a loaded machine)

    def named(path: str | Path, original: Callable[[str | Path], str] = locks.lock_holder) -> str:
        holder = original(path)  # read before letting go: a released lock clears its holder
        if inspect.currentframe().f_back.f_locals.get("blocking"):  # not a non-blocking try's LockBusy
            release.set()  # the waiting run has asked who holds the lock: let go
        return holder

    monkeypatch.setattr(locks, "lock_holder", named)
    holder = threading.Thread(target=stuck)
    holder.start()
    held.wait(10)
    try:
        check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0,
              rf"^waiting for the lock .*{jid}\.lock: held by pid {os.getpid()} on .*, for \d+ s"
              r"(; the holder has used no CPU in the last \d+ s and looks stuck \(no progress\))?$")
    finally:
        release.set()
        holder.join()
    assert len(record_files(out)) == 1


def test_two_preprocess_runs_on_one_root(tmp_path):
    from tests.data.bidmc.make_data import make

    make(tmp_path / "raw" / "bidmc")
    command = [sys.executable, "-c", "from ppgbench_pl.cli import main; main()", "preprocess", "bidmc",
               "--raw-root", str(tmp_path / "raw"), "--fs", "32", "--output", str(tmp_path / "out")]
    procs = [subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        check((proc.returncode, "", err), 0, r"^")
    assert sorted(p.name for p in (tmp_path / "out" / "fs_32").iterdir()) == ["BIDMC"]


# -- 9. the downloader does not wait forever (issue 12 item 11) --------------------------------------------
def test_stalled_download_fails_in_one_line(tmp_path, capsys, monkeypatch):
    from tests.data.http_fixture import FixtureServer, zip_bytes

    with FixtureServer() as server:
        server.files["/WESAD.zip"] = zip_bytes({"WESAD/S2/S2.pkl": b"x" * 100_000})
        server.trickle["/WESAD.zip"] = 0.1
        server.trickle_for = 3.0
        monkeypatch.setenv("PPGBENCH_MIRROR_WESAD", server.url("/WESAD.zip"))
        check(run_cli(["download", "wesad", "--raw-root", str(tmp_path), "--no-progress", "--stall-timeout",
                       "0.5", "--retries", "0"], capsys), 1,
              r"^wesad: failed: .*WESAD\.zip: stalled at \d+ of \d+ bytes .*; run again to resume$")


# -- 10. README troubleshooting: the lines are what the tool prints ----------------------------------------
def test_readme_troubleshooting_lines_are_what_the_tool_prints():
    """Every ``ppgbench: error:`` line of the README's Troubleshooting section was printed by a case above
    (``...`` in the README stands for any text). Runs last, on what the cases saw."""
    if len(SEEN) < 20:
        pytest.skip("run with the whole corpus")
    text = (REPO / "README.md").read_text()
    section = text.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("ppgbench: error: ")]
    assert len(lines) >= 5
    unmatched = [line for line in lines
                 if not any(re.fullmatch(".*".join(map(re.escape, line.split("..."))), seen) for seen in SEEN)]
    assert unmatched == []
