"""A new user's first hour, as the README tells it: init, the smoke budget on a real-format tree, the published plan.

The tree is PPG-DaLiA's raw format (tests/data/dalia) preprocessed by ``ppgbench preprocess``: 12 subjects
of 90 s (39 usable windows each), so the smoke budget's caps (10 subjects x 32 windows) really cut it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.subset import SubsetStore, chosen_subjects, chosen_windows
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.errors import ConfigError
from tests.cli_helpers import run_cli as run
from tests.data.dalia import make_data as dalia_data

ROOT = Path(__file__).resolve().parents[1]
TINY_NET = "tests.encoders.test_custom.TinyConvNet"
SUBJECTS = tuple(range(1, 13))


@pytest.fixture(scope="module")
def dalia_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A processed DaLiA tree at 64 Hz (the user's model) and 100 Hz (the PRV control)."""
    base = tmp_path_factory.mktemp("dalia_budget")
    dalia_data.make(base / "raw" / "dalia", subjects=SUBJECTS, duration_s=90)
    from ppgbench_pl.cli import main

    main(["preprocess", "dalia", "--raw-root", str(base / "raw"), "--fs", "64", "100",
          "--output", str(base / "processed")])
    return base / "processed"


def _edit_template(path: Path, output: Path, root: Path) -> None:
    text = path.read_text()
    for old, new in {"mypackage.models.MyPPGNet": TINY_NET, "sampling_rate: 125 ": "sampling_rate: 64 ",
                     "pooling: none ": "pooling: mean ", "results/my_model": str(output),
                     "dataset: synthetic ": "dataset: dalia ", "data/processed": str(root)}.items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


def test_init_then_smoke_on_a_real_tree_then_the_published_dry_run(dalia_tree, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["init", "my_model/"], capsys)
    assert code == 0, err
    assert "smoke test" in out and "budget/smoke.yaml" in out and "--dry-run" in out
    config, smoke = tmp_path / "my_model" / "my_model.yaml", tmp_path / "my_model" / "budget" / "smoke.yaml"
    assert smoke.read_text() == (ROOT / "configs/budget/smoke.yaml").read_text()  # one budget, two copies
    _edit_template(config, tmp_path / "results" / "my_model", dalia_tree)

    code, out, err = run(["fit", "--config", str(config), "--config", str(smoke), "--output_dir",
                          "results/my_model-smoke", "--data.init_args.tasks", "[dalia-hr]", "--progress", "false"],
                         capsys)
    assert code == 0, err
    run_dir = tmp_path / "results" / "my_model-smoke"
    summary = pd.read_csv(run_dir / "summary.csv")
    assert set(summary.budget) == {"smoke"} and set(summary.unit) == {"bpm"} and set(summary.dataset) == {"dalia"}
    assert "bpm" in out and "smoke" in out  # the printed table reads itself
    records = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")]
    assert records and all(r["budget"] == "smoke" and (r["seed"], r["fold"]) == (42, 0) for r in records)
    for r in records:  # at most 10 of the 12 subjects
        assert len(r["train_groups"]) + len(r["test_groups"]) == 10
    identity = json.loads((run_dir / "run.json").read_text())["identity"]
    assert identity["budget"] == "smoke"
    assert identity["datasets"]["dalia"]["caps"] == {"max_subjects": 10, "max_windows_per_subject": 32}

    code, out, err = run(["report", str(run_dir), "--output", str(tmp_path / "report")], capsys)
    assert code == 0, err
    table = next((tmp_path / "report").rglob("main_linear.md")).read_text()
    assert "SMOKE BUDGET" in table and "MAE (bpm) ↓" in table

    published = tmp_path / "my_model" / "budget" / "published.yaml"
    code, out, err = run(["fit", "--config", str(config), "--config", str(published), "--dry-run"], capsys)
    assert code == 0, err
    assert "budget: published" in out and "seeds [42, 43, 44, 45, 46]" in out

    # the smoke folder never takes published results
    code, out, err = run(["fit", "--config", str(config), "--config", str(published), "--output_dir",
                          str(run_dir), "--data.init_args.tasks", "[dalia-hr]"], capsys)
    assert code == 2 and "smoke budget, not published" in err and "--output_dir" in err


def test_caps_pick_the_same_subjects_and_spread_windows(dalia_tree):
    full = ProcessedDataset(dalia_tree / "fs_64" / "Dalia")
    part = SubsetStore(full.directory, max_subjects=5, max_windows_per_subject=4)
    assert part.groups == SubsetStore(full.directory, 5, 4).groups and len(part.groups) == 5
    assert part.groups == [g for g in full.groups if g in set(part.groups)]  # the tree's order
    group = part.groups[0]
    n = len(full.ppg(group))
    rows = chosen_windows(n, 4)
    assert rows[0] == 0 and rows[-1] == n - 1 and len(rows) == 4
    np.testing.assert_array_equal(part.ppg(group), full.ppg(group)[rows])
    np.testing.assert_array_equal(part.target(group, "hr", n_windows=4), full.target(group, "hr")[rows])
    assert chosen_subjects(["a", "b"], 5) == ["a", "b"] and list(chosen_windows(3, 10)) == [0, 1, 2]


def test_caps_reach_the_datamodule_and_are_refused_when_too_small(dalia_tree):
    dm = PPGDataModule("dalia", root=str(dalia_tree), tasks=["dalia-hr"], max_subjects=6, max_windows_per_subject=5)
    windows = dm.windows(64.0)
    assert len(windows.group_names) == 6 and len(windows.x) == 30
    assert dm.settings()["caps"] == {"max_subjects": 6, "max_windows_per_subject": 5}
    assert "caps" not in PPGDataModule("dalia", root=str(dalia_tree)).settings()  # old folders keep their identity
    with pytest.raises(ConfigError, match="max_subjects=3"):
        PPGDataModule("dalia", root=str(dalia_tree), max_subjects=3)


def test_budget_caps_searched_regimes_and_published_refuses_caps():
    from ppgbench_pl.benchmark.budget import Budget, apply_budget, budget_of

    spec = {"regimes": [{"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
                         "init_args": {"search": {"n_trials": 48, "max_epochs": 25}}},
                        {"class_path": "ppgbench_pl.regimes.LinearRegime"}], "data": {}}
    out = apply_budget(spec, Budget("smoke", n_trials=4, n_startup_trials=2, max_epochs=3, subject_repeats=1))
    assert out["budget"] == "smoke"
    assert out["regimes"][0]["init_args"] == {"search": {"n_trials": 4, "max_epochs": 3, "n_startup_trials": 2},
                                              "subject_repeats": 1}
    assert out["regimes"][1].get("init_args", {}) == {}
    with pytest.raises(ConfigError, match="max_subjects=10: the published budget"):
        apply_budget({**spec, "data": {"max_subjects": 10}}, Budget())
    with pytest.raises(ConfigError, match="budget.n_trials=0"):
        budget_of({"budget": {"name": "smoke", "n_trials": 0}})
    with pytest.raises(ConfigError, match="budget.trials"):
        budget_of({"budget": {"trials": 3}})
