"""Every setting is honoured or refused, and a refusal comes before anything is written (issues 10, 12).

Each refused setting exits 2 with one line on stderr that names it, and leaves no run folder (or an
existing one exactly as it was).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.benchmark.helpers import finished_tiny_run, record_files, run, tree
from tests.cli_helpers import run_cli

PRV = "{class_path: ppgbench_pl.encoders.prv.PublishedPRVEncoder}"

#: (arguments, text the one line must hold): trainer options a protocol run cannot honour.
REFUSED_TRAINER = {
    "fast_dev_run": (["--trainer.fast_dev_run", "true"], "trainer.fast_dev_run"),
    "max_epochs": (["--trainer.max_epochs", "3"], "trainer.max_epochs"),
    "max_steps": (["--trainer.max_steps", "10"], "trainer.max_steps"),
    "limit_train_batches": (["--trainer.limit_train_batches", "0.5"], "trainer.limit_train_batches"),
    "gradient_clip_val": (["--trainer.gradient_clip_val", "1.0"], "trainer.gradient_clip_val"),
    "accumulate_grad_batches": (["--trainer.accumulate_grad_batches", "4"],
                                "trainer.accumulate_grad_batches"),
    "default_root_dir": (["--trainer.default_root_dir", "elsewhere"], "trainer.default_root_dir"),
    "logger": (["--trainer.logger", "{class_path: lightning.pytorch.loggers.CSVLogger, "
                                    "init_args: {save_dir: x}}"], "trainer.logger"),
    "callback": (["--trainer.callbacks", "[{class_path: lightning.pytorch.callbacks.LearningRateMonitor}]"],
                 "no regime configured"),
    "logging_callback": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.MLPRegime}, "
                          "{class_path: lightning.pytorch.callbacks.LearningRateMonitor}]"],
                         "LearningRateMonitor needs a logger or checkpoints"),
    "checkpoint_callback": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.MLPRegime}, "
                             "{class_path: lightning.pytorch.callbacks.ModelCheckpoint}]"],
                            "ModelCheckpoint needs a logger or checkpoints"),
    "tuner_callback": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.MLPRegime}, "
                        "{class_path: lightning.pytorch.callbacks.LearningRateFinder}]"],
                       "LearningRateFinder tunes the batch size or learning rate, which are the search's parameters"),
    "progress_bar_callback": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.MLPRegime}, "
                               "{class_path: lightning.pytorch.callbacks.TQDMProgressBar}]"],
                              "TQDMProgressBar the trials' trainers run without a progress bar"),
    "early_stopping_refit": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.MLPRegime, init_args: "
                              "{refit: true}}, {class_path: lightning.pytorch.callbacks.EarlyStopping, init_args: "
                              "{monitor: val_score, mode: max}}]"], "EarlyStopping beside refit: true"),
    "callback_without_trials": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.LinearRegime}, "
                                 "{class_path: lightning.pytorch.callbacks.Timer}]"], "would never run"),
    "not_a_callback": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.LinearRegime}, "
                        "{class_path: collections.OrderedDict}]"], "trainer.callbacks"),
    "ckpt_path": (["--ckpt_path", "/nonexistent.ckpt"], "--ckpt_path"),
    # multi-process flags no ppgbench training honours: num_nodes hung for good, the others did nothing
    "num_nodes": (["--trainer.num_nodes", "2"], "trainer.num_nodes=2: a run trains on one node"),
    "sync_batchnorm": (["--trainer.sync_batchnorm", "true"], "trainer.sync_batchnorm=True: has no effect"),
    "logger_true": (["--trainer.logger", "true"], "trainer.logger"),
    "model_setting": (["--model.init_args.head_lr", "0.1"], "model.init_args.head_lr"),
}

#: (arguments, text the one line must hold): settings that make no sense, refused before writing.
REFUSED_EARLY = {
    "n_inner_folds": (["--data.init_args.n_inner_folds", "1"], "n_inner_folds"),
    "no_seeds": (["--data.init_args.seeds", "[]"], "seeds"),
    "no_folds": (["--data.init_args.folds", "[]"], "folds"),
    "duplicate_seeds": (["--data.init_args.seeds", "[42, 42]"], "duplicates"),
    "no_tasks": (["--data.init_args.tasks", "[]"], "task"),
    "only_regimes_empty": (["--only_regimes", "[]"], "--only_regimes"),
    "only_encoders_empty": (["--only_encoders", "[]"], "--only_encoders"),
    "unknown_regime": (["--only_regimes", "[lineer]"], "lineer"),
    "duplicate_controls": (["--controls", f"[{PRV}, {PRV}]"], "unique"),
    "ci_unit": (["--ci_unit", "sed"], "ci_unit"),
    "workers_0": (["--executor", "process", "--executor.init_args.workers", "0"], "workers"),
    "max_cache_gb": (["--max_cache_gb", "0"], "--max_cache_gb"),
    "outer_fold_out_of_range": (["--data.init_args.folds", "[7]"], "fold"),
    "wandb_choice": (["--wandb", "sometimes"], "wandb"),
}


@pytest.fixture(scope="module")
def done_run(tmp_path_factory: pytest.TempPathFactory, engine_root: Path) -> tuple[Path, Path]:
    """A finished tiny run folder and its config (copied by tests that must leave a folder unchanged)."""
    return finished_tiny_run(tmp_path_factory.mktemp("refusals"), engine_root)


def refused(capsys: pytest.CaptureFixture[str], args: list[str], text: str, command: str = "fit") -> None:
    code, _, err = run_cli([command, *args], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("case", list(REFUSED_TRAINER))
def test_a_trainer_option_without_meaning_is_refused_in_one_line(tmp_path, capsys, done_run, case):
    args, text = REFUSED_TRAINER[case]
    out = tmp_path / "run"
    refused(capsys, ["--config", str(done_run[0]), "--output_dir", str(out), *args], text)
    assert not out.exists()


def test_fast_dev_run_is_refused_by_both_commands(tmp_path, capsys, done_run):
    for command in ("fit", "benchmark"):
        refused(capsys, ["--config", str(done_run[0]), "--output_dir", str(tmp_path / command),
                         "--trainer.fast_dev_run", "true"], "fast_dev_run", command)
        assert not (tmp_path / command).exists()


@pytest.mark.parametrize("case", list(REFUSED_EARLY))
def test_a_bad_setting_is_refused_before_a_new_folder_is_made(tmp_path, capsys, done_run, case):
    args, text = REFUSED_EARLY[case]
    out = tmp_path / "run"
    refused(capsys, ["--config", str(done_run[0]), "--output_dir", str(out), *args], text)
    assert not out.exists()


@pytest.mark.parametrize("case", ["n_inner_folds", "no_seeds", "duplicate_controls", "ci_unit", "workers_0",
                                  "only_regimes_empty"])
def test_a_bad_setting_leaves_an_existing_folder_as_it_was(tmp_path, capsys, done_run, case):
    args, text = REFUSED_EARLY[case]
    out = tmp_path / "run"
    shutil.copytree(done_run[1], out)
    before = tree(out)
    refused(capsys, ["--config", str(done_run[0]), "--output_dir", str(out), *args], text)
    assert tree(out) == before
    # and the corrected command still resumes the folder (nothing was poisoned)
    assert run(["--config", str(done_run[0]), "--output_dir", str(out)], "fit") == 0
    assert len(record_files(out)) == 1


def test_an_output_dir_that_is_a_file_is_refused(tmp_path, capsys, done_run):
    target = tmp_path / "taken"
    target.write_text("not a folder")
    refused(capsys, ["--config", str(done_run[0]), "--output_dir", str(target)], "not a folder")
    assert target.read_text() == "not a folder"
    refused(capsys, ["--config", str(done_run[0]), "--output_dir", str(target / "run")], str(target))


def test_a_device_list_written_as_a_string_is_read_as_lightning_reads_it():
    """``devices: "0,1"`` is two GPUs to Lightning; it passed both device checks as a string before."""
    from ppgbench_pl.benchmark.trainer_block import trainer_settings
    from ppgbench_pl.errors import ConfigError
    from ppgbench_pl.regimes.mlp import MLPRegime

    settings = trainer_settings({"accelerator": "gpu", "devices": "0,1"})
    assert settings["devices"] == [0, 1]
    with pytest.raises(ConfigError, match="devices"):
        MLPRegime().check_trainer(settings)


@pytest.mark.parametrize("setting", [{"amp": False}, {"amp_dtype": "bfloat16"}])
def test_finetune_amp_settings_beside_trainer_precision_are_refused(setting):
    """``trainer.precision`` sets the stack's precision, so ``amp``/``amp_dtype`` beside it did nothing."""
    from ppgbench_pl.errors import ConfigError
    from ppgbench_pl.regimes.finetune import FinetuneRegime

    with pytest.raises(ConfigError, match=r"^finetune amp.*has no effect beside trainer.precision='32-true'"):
        FinetuneRegime(**setting).check_trainer({"precision": "32-true"})
    FinetuneRegime(**setting).check_trainer({})  # alone, it is the regime's own precision choice
    FinetuneRegime().check_trainer({"precision": "32-true"})
