import json
from pathlib import Path

import pandas as pd
import pytest

from ppgbench_pl.cli import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
CASES = {
    "regime_linear.yaml": (["linear"], []),
    "regime_rf.yaml": (["rf"], ["--trainer.callbacks.init_args.n_estimators", "[8]",
                                "--trainer.callbacks.init_args.n_jobs", "1"]),
    "regime_label_efficiency.yaml": (["linear_frac1", "linear_frac10", "linear_frac100"], []),
    "regime_mlp.yaml": (["mlp"], ["--trainer.callbacks.init_args.search.n_trials", "2",
                                  "--trainer.callbacks.init_args.search.max_epochs", "2"]),
    "regime_finetune.yaml": (["finetune"], ["--trainer.callbacks.init_args.search.n_trials", "2",
                                            "--trainer.callbacks.init_args.search.max_epochs", "2",
                                            "--trainer.callbacks.init_args.search_space", '{"batch_size": [16]}']),
}


def test_every_regime_config_has_a_case():
    assert sorted(p.name for p in CONFIGS.glob("regime_*.yaml")) == sorted(CASES)
CONTROLS = '[{"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder", "init_args": {"n_jobs": 1}}]'


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("configs_data")


@pytest.mark.parametrize("config", sorted(CASES))
def test_config_runs_quick_check(config, data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.chdir(tmp_path)  # the configs' relative results/ and log folders land here
    regimes, extra = CASES[config]
    main(["fit", "--config", str(CONFIGS / config), "--output_dir", "run",
          "--data.init_args.root", str(data_root),
          "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]",
          "--data.init_args.tasks", "[synthetic-hr]", "--data.init_args.synthetic_subjects", "10",
          "--data.init_args.synthetic_windows", "6", "--controls", CONTROLS, "--progress", "false", *extra])
    # returns normally on success (a non-zero exit would raise SystemExit)
    summary = pd.read_csv(tmp_path / "run" / "summary.csv")
    for model in ("small_cnn", "prv_published", "constant"):
        assert sorted(summary[summary.model == model].regime) == sorted(regimes)
    records = [json.loads(p.read_text()) for p in (tmp_path / "run" / "jobs").glob("*/results.json")]
    assert len(records) == 2 * len(regimes) and all(r["status"] == "ok" for r in records)
    if config == "regime_rf.yaml":
        assert {r["backend"] for r in records} == {"sklearn"}
        assert {r["results"][0]["params"]["n_estimators"] for r in records} == {8}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # every file the run writes is under it
