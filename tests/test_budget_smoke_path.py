"""A new user's first hour, as the README tells it: init, the smoke budget on a real-format tree, the published plan.

The tree is PPG-DaLiA's raw format (tests/data/dalia) preprocessed by ``ppgbench preprocess``: 12 subjects
of 90 s (39 usable windows each), so the smoke budget's caps (10 subjects x 32 windows) really cut it.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.subset import SubsetStore, chosen_windows, stratified_subjects
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


def readme_steps() -> list[list[str]]:
    """The commands of the README's "Your own model" block, as written there (comments dropped)."""
    section = (ROOT / "README.md").read_text().split("## Your own model", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split(" #", 1)[0]) for line in block.splitlines() if line.startswith("ppgbench ")]


def test_a_new_users_path_as_the_readme_writes_it(dalia_tree, tmp_path, capsys, monkeypatch):
    """init, the smoke command on a processed real-format tree, its report, the published dry run: each command
    is the README's, each prints what the README says it prints (a table, the report's path, an estimate)."""
    monkeypatch.chdir(tmp_path)
    init, smoke_run, report, dry_run, published_run = readme_steps()
    code, out, err = run(init[1:], capsys)
    assert code == 0, err
    printed = [shlex.split(m[1]) for m in re.finditer(r"^  \d\. [^:]+:\s+(ppgbench .*)$", out, re.MULTILINE)]
    assert printed == [smoke_run, report, dry_run, published_run]  # init prints the README's commands
    config, smoke = tmp_path / "my_model" / "my_model.yaml", tmp_path / "my_model" / "budget" / "smoke.yaml"
    assert smoke.read_text() == (ROOT / "configs/budget/smoke.yaml").read_text()  # one budget, two copies
    _edit_template(config, tmp_path / "results" / "my_model", dalia_tree)

    code, out, err = run([*smoke_run[1:], "--data.init_args.tasks", "[dalia-hr]", "--progress", "false"], capsys)
    assert code == 0, err
    run_dir = tmp_path / "results" / "my_model-smoke"
    summary = pd.read_csv(run_dir / "summary.csv")
    assert set(summary.budget) == {"smoke"} and set(summary.unit) == {"bpm"} and set(summary.dataset) == {"dalia"}
    header = next(line for line in out.splitlines() if line.split()[:3] == ["model", "task", "regime"])
    assert {"unit", "mean", "budget"} <= set(header.split())  # the printed table reads itself
    assert "bpm" in out and "smoke" in out and out.rstrip().endswith("results in results/my_model-smoke")
    records = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")]
    assert records and all(r["budget"] == "smoke" and (r["seed"], r["fold"]) == (42, 0) for r in records)
    for r in records:  # at most 10 of the 12 subjects
        assert len(r["train_groups"]) + len(r["test_groups"]) == 10
    identity = json.loads((run_dir / "run.json").read_text())["identity"]
    assert identity["budget"] == "smoke"
    assert identity["datasets"]["dalia"]["caps"] == {"max_subjects": 10, "max_windows_per_subject": 32}

    code, out, err = run(report[1:], capsys)
    assert code == 0, err
    assert out.rstrip().splitlines()[-1] == "report: report/my_model-smoke/index.html"  # the README's words
    page = (tmp_path / "report" / "my_model-smoke" / "index.html").read_text(encoding="utf-8")
    assert "<h1>ppgbench report: SMOKE (not the published protocol)</h1>" in page  # issue 32.6: at the top
    table = next((tmp_path / "report").rglob("main_linear.md")).read_text()
    assert "SMOKE BUDGET" in table and "MAE (bpm) ↓" in table

    code, out, err = run(dry_run[1:], capsys)
    assert code == 0, err
    assert "budget: published" in out and "seeds [42, 43, 44, 45, 46]" in out and "jobs planned" in out
    estimate = out.split("\nestimate", 1)[1]  # what the dry run's estimate prints (issue 20 point 1)
    assert re.search(r"\ntotal +\d+ .* s", estimate) and "wall time with the local executor" in estimate

    # the smoke folder never takes published results
    code, out, err = run([*published_run[1:], "--output_dir", str(run_dir), "--data.init_args.tasks", "[dalia-hr]"],
                         capsys)
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
    assert stratified_subjects(["a", "b"], 5, None) == ["a", "b"] and list(chosen_windows(3, 10)) == [0, 1, 2]


def test_caps_reach_the_datamodule_and_are_refused_when_too_small(dalia_tree):
    dm = PPGDataModule("dalia", root=str(dalia_tree), tasks=["dalia-hr"], max_subjects=6, max_windows_per_subject=5)
    windows = dm.windows(64.0)
    assert len(windows.group_names) == 6 and len(windows.x) == 30
    assert dm.settings()["caps"] == {"max_subjects": 6, "max_windows_per_subject": 5}
    assert "caps" not in PPGDataModule("dalia", root=str(dalia_tree)).settings()  # old folders keep their identity
    with pytest.raises(ConfigError, match="max_subjects=3"):
        PPGDataModule("dalia", root=str(dalia_tree), max_subjects=3)


def test_budget_caps_searched_regimes_and_published_refuses_caps():
    from types import SimpleNamespace

    from ppgbench_pl.benchmark.budget import Budget, apply_budget
    from ppgbench_pl.regimes import LinearRegime
    from ppgbench_pl.regimes.mlp import MLPRegime

    mlp, linear = MLPRegime(), LinearRegime()
    apply_budget([mlp, linear], Budget("smoke", n_trials=4, n_startup_trials=2, max_epochs=3, subject_repeats=1), [])
    assert (mlp.search.n_trials, mlp.search.n_startup_trials, mlp.search.max_epochs, mlp.subject_repeats) == (4, 2, 3, 1)
    assert mlp.settings() == MLPRegime(search={"n_trials": 4, "n_startup_trials": 2, "max_epochs": 3},
                                       subject_repeats=1).settings()  # as if the regime had been given them
    assert linear.settings() == LinearRegime().settings()
    with pytest.raises(ConfigError, match="max_subjects=10: the published budget"):
        apply_budget([], Budget(), [SimpleNamespace(max_subjects=10, max_windows_per_subject=None)])
    with pytest.raises(ConfigError, match="budget.n_trials=0"):
        Budget("smoke", n_trials=0)
