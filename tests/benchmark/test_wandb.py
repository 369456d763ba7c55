"""W&B mirrors the run folder: offline files under it when WANDB_MODE=offline, nothing when disabled."""

from __future__ import annotations

import json

import pytest

from tests.benchmark.helpers import LINEAR, run, suite_config, write_config


@pytest.fixture(autouse=True)
def _fresh_wandb_session():
    """wandb keeps process-wide settings (its run directory among them) after the first init; reset
    them so later tests in this process log where they ask to."""
    yield
    import wandb

    wandb.teardown()


def offline_runs(run_dir):
    return sorted(p.name for p in (run_dir / "wandb").glob("offline-run-*"))


@pytest.mark.parametrize("setting", ["group", "per-job"])
def test_offline_runs_are_written_under_the_run_folder(tmp_path, bench_root, monkeypatch, setting):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    config = suite_config(bench_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], wandb=setting)
    path = write_config(tmp_path / "c.yaml", config)
    assert run(["--config", str(path)]) == 0
    runs = offline_runs(run_dir)
    # one run for the model's (task, regime) cell and one for the constant baseline's, plus one per job
    # (2 folds) when asked
    assert len(runs) == (2 if setting == "group" else 4)
    assert all(list((run_dir / "wandb" / r).glob("run-*.wandb")) for r in runs)
    assert not (tmp_path / "wandb").exists()  # nothing in the working directory
    markers = list((run_dir / "wandb" / ".ppgbench-cells").glob("*.json"))
    cells = {tuple(c["cell"]): c for c in (json.loads(m.read_text()) for m in markers)}
    assert len(cells) == 2 and len(cells[("small_cnn", "synthetic-hr", "linear")]["records"]) == 2
    assert "row" in cells[("constant", "synthetic-hr", "linear")]  # the baseline's run is marked by its row
    # A rerun with nothing new logs nothing again.
    assert run(["--config", str(path)]) == 0
    assert offline_runs(run_dir) == runs


def test_disabled_writes_nothing(tmp_path, bench_root, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    run_dir = tmp_path / "run"
    config = suite_config(bench_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], wandb="per-job")
    assert run(["--config", str(write_config(tmp_path / "c.yaml", config))]) == 0
    assert (run_dir / "summary.csv").exists()
    assert not (run_dir / "wandb").exists()
