"""One engine behind ``fit`` and ``benchmark`` (issue 10): the same cells give the same files, and the
``trainer`` block's device settings reach the trainers that jobs build."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import lightning as L
import pytest

from tests.benchmark.helpers import CNN, HALF, LINEAR, VOLATILE, record_files, run, suite_config, suite_of, write_config

CONTROL = {"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder", "init_args": {"n_jobs": 1}}
TINY_FINETUNE = {"class_path": "ppgbench_pl.regimes.finetune.FinetuneRegime",
                 "init_args": {"subject_repeats": 1,
                               "search": {"n_trials": 1, "n_startup_trials": 1, "max_epochs": 1},
                               "search_space": {"batch_size": [16]}}}


def stripped(path: Path) -> str:
    """A record as canonical JSON without the fields that say when and where it ran."""
    record = json.loads(path.read_text())
    return json.dumps({k: v for k, v in record.items() if k not in VOLATILE}, sort_keys=True)


def test_fit_and_benchmark_write_the_same_files(tmp_path, engine_root):
    config = suite_config(engine_root, tmp_path / "unused", encoders=[CNN], regimes=[LINEAR, HALF],
                          tasks=["synthetic-hr"], data={"synthetic_windows": 4}, controls=[CONTROL])
    path = write_config(tmp_path / "config.yaml", config)
    runs = {command: tmp_path / command for command in ("fit", "benchmark")}
    for command, out in runs.items():
        assert run(["--config", str(path), "--output_dir", str(out)], command) == 0
    fit, bench = (sorted(p.relative_to(out) for p in record_files(out)) for out in runs.values())
    assert fit == bench and len(fit) == 2 * 2 * 2  # (model, control) x 2 regimes x 2 folds
    for rel in fit:
        assert stripped(runs["fit"] / rel) == stripped(runs["benchmark"] / rel), rel
        for npz in (runs["fit"] / rel).parent.glob("*.npz"):  # the predictions, byte for byte
            assert npz.read_bytes() == (runs["benchmark"] / rel).parent.joinpath(npz.name).read_bytes()
    assert (runs["fit"] / "summary.csv").read_bytes() == (runs["benchmark"] / "summary.csv").read_bytes()
    meta = {c: json.loads((out / "run.json").read_text()) for c, out in runs.items()}
    assert meta["fit"]["parameters"] == meta["benchmark"]["parameters"]
    assert meta["fit"]["identity"] == meta["benchmark"]["identity"]
    # the model under test is counted as built (not after a regime froze it): all its weights are trainable
    cnn = meta["fit"]["parameters"]["small_cnn"]
    assert cnn["total"] > 0 and cnn["trainable"] == cnn["total"]
    status = {c: json.loads((out / "status.json").read_text()) for c, out in runs.items()}
    assert status["fit"]["complete"] and status["fit"].keys() == status["benchmark"].keys()


@pytest.fixture
def trainer_calls(monkeypatch) -> list[dict[str, Any]]:
    """Every ``lightning.Trainer(...)`` built in this process: its keyword arguments.

    ``ddp_spawn`` is recorded as asked and then run as ``auto`` (one CPU device here): the test is about
    the setting reaching the trainer, not about spawning ranks.
    """
    calls: list[dict[str, Any]] = []
    original = L.Trainer.__init__

    @functools.wraps(original)  # the CLI reads the trainer's options from this signature
    def spy(self: L.Trainer, *args: Any, **kwargs: Any) -> None:
        calls.append(dict(kwargs))
        if kwargs.get("strategy") == "ddp_spawn":
            kwargs["strategy"] = "auto"
        original(self, *args, **kwargs)

    monkeypatch.setattr(L.Trainer, "__init__", spy)
    return calls


def test_trainer_settings_reach_every_inner_trainer(tmp_path, engine_root, trainer_calls):
    config = suite_config(engine_root, tmp_path / "run", regimes=[TINY_FINETUNE], tasks=["synthetic-hr"],
                          folds=[0], data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--trainer.deterministic", "true"], "fit") == 0
    inner = [c for c in trainer_calls if c.get("callbacks")]  # trainers that jobs build around the regime
    assert inner, "the finetune job built no trainer"
    for kwargs in inner:
        assert kwargs["deterministic"] is True, kwargs
        assert kwargs["accelerator"] == "cpu" and kwargs["devices"] == 1
    assert any(c.get("max_epochs") == -1 for c in inner)  # the stack runs until its search ends (per-trial budgets)
    record = json.loads(record_files(tmp_path / "run")[0].read_text())
    assert record["status"] == "ok", record.get("error")


def test_suite_trainer_kwargs_are_the_honoured_settings(tmp_path, engine_root):
    from ppgbench_pl.benchmark.trainer_block import trainer_settings

    settings = trainer_settings({"accelerator": "cpu", "devices": "2", "strategy": "ddp_spawn",
                                 "precision": "bf16", "deterministic": True, "max_epochs": None, "logger": False,
                                 "callbacks": [LINEAR]})
    assert settings == {"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn", "precision": "bf16-mixed",
                        "deterministic": True}
    config = suite_config(engine_root, tmp_path / "run", regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0],
                          data={"synthetic_windows": 4})
    config["trainer"] = {"accelerator": "cpu", "devices": "2", "strategy": "ddp_spawn", "precision": "bf16",
                         "deterministic": True, "callbacks": [LINEAR]}
    suite = suite_of(config)
    assert suite.trainer_kwargs == {**settings, "num_nodes": 1, "sync_batchnorm": False}  # the parser's defaults
    ctx = suite.context(suite.plan()[0])
    assert ctx.trainer_kwargs == suite.trainer_kwargs


def test_trainer_precision_reaches_the_neural_regimes(tmp_path, engine_root, trainer_calls):
    config = suite_config(engine_root, tmp_path / "run", regimes=[TINY_FINETUNE], tasks=["synthetic-hr"],
                          folds=[0], data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--trainer.precision", "64-true"], "fit") == 0
    inner = [c for c in trainer_calls if c.get("callbacks")]
    assert inner and all(c["precision"] == "64-true" for c in inner)


@pytest.mark.parametrize("regime", [
    {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime"},
    {"class_path": "ppgbench_pl.regimes.finetune.FinetuneRegime"},
], ids=["mlp", "finetune"])
def test_a_spawning_strategy_is_refused_up_front_by_the_trial_stack(tmp_path, engine_root, capsys, regime):
    config = suite_config(engine_root, tmp_path / "run", regimes=[regime], tasks=["synthetic-hr"], folds=[0],
                          data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--trainer.strategy", "ddp_spawn"], "fit") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trainer.strategy ddp_spawn" in err[0] and "one stack" in err[0]
    assert not (tmp_path / "run").exists()


def test_fp16_mixed_on_an_explicit_cpu_is_refused_up_front(tmp_path, engine_root, capsys):
    """Lightning would run ``16-mixed`` on a CPU as ``bf16-mixed`` while the record said ``16-mixed``."""
    config = suite_config(engine_root, tmp_path / "run", regimes=[TINY_FINETUNE], tasks=["synthetic-hr"],
                          folds=[0], data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--trainer.precision", "16-mixed", "--trainer.accelerator", "cpu"],
               "fit") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ppgbench: error: trainer.precision 16-mixed: Lightning would run bf16-mixed on cpu; fp16 "
                   "mixed precision needs CUDA: ask for bf16-mixed or 32-true"], err
    assert not record_files(tmp_path / "run")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="auto resolves to CUDA here")
def test_a_precision_lightning_replaces_fails_the_job_in_one_line(tmp_path, engine_root, capsys):
    """``accelerator: auto`` is resolved where the jobs run, so each trainer checks what Lightning will run."""
    config = suite_config(engine_root, tmp_path / "run", regimes=[TINY_FINETUNE], tasks=["synthetic-hr"],
                          folds=[0], data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--trainer.precision", "16", "--trainer.accelerator", "auto"], "fit") == 1
    failed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 1 and "ConfigError: trainer.precision 16-mixed: Lightning would run bf16-mixed on cpu; " \
        "fp16 mixed precision needs CUDA" in failed[0], failed
    assert not record_files(tmp_path / "run")  # no ok record


def test_determinism_settings_reach_the_embedding_pass(tmp_path, engine_root, trainer_calls):
    """``deterministic`` and ``benchmark`` are in the run identity, so the embeddings are computed under them."""
    from ppgbench_pl.benchmark.embeddings import FiniteEmbeddings

    config = suite_config(engine_root, tmp_path / "run", regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0],
                          data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path), "--trainer.deterministic", "true", "--trainer.benchmark", "false",
                "--cache_dir", str(tmp_path / "cache")], "fit") == 0
    passes = [c for c in trainer_calls if any(isinstance(cb, FiniteEmbeddings) for cb in c.get("callbacks") or [])]
    assert passes and all(c["deterministic"] is True and c["benchmark"] is False for c in passes), passes
