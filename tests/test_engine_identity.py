"""One run folder, one set of numbers (issues 10 and 12): what changes a number is part of the identity,
a source edit is resumed only on request, and the summary covers every record in the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.benchmark.helpers import (
    HALF,
    LINEAR,
    finished_tiny_run,
    record_files,
    run,
    status,
    suite_config,
    tree,
    write_config,
)
from tests.cli_helpers import run_cli

OTHER_SOURCE = {"ppgbench": "0.0.0", "source_sha256": "0" * 64}

#: (arguments, what the refusal names): each changes a number, so an existing folder refuses it.
IDENTITY = {
    "precision": (["--trainer.precision", "64-true"], "trainer"),
    "precision_short": (["--trainer.precision", "bf16"], "trainer"),
    "deterministic": (["--trainer.deterministic", "true"], "trainer"),
    "n_inner_folds": (["--data.init_args.n_inner_folds", "3"], "datasets.synthetic"),
    "n_folds": (["--data.init_args.n_folds", "6"], "datasets.synthetic"),
    "batch_size": (["--data.init_args.batch_size", "32"], "datasets.synthetic"),
    "synthetic_data": (["--data.init_args.synthetic_seed", "1"], "datasets.synthetic"),
    "encoder": (["--model.init_args.encoder.init_args.seed", "1"], "encoders.small_cnn"),
    "regime": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.LinearRegime, "
                                       "init_args: {binary_metric: balanced_accuracy}}]"], "regimes.linear"),
}
#: Settings that change how fast or where jobs run, never a number: accepted by an existing folder.
SPEED = {
    "process_executor": ["--executor", "process", "--executor.init_args.workers", "1"],
    "num_workers": ["--data.init_args.num_workers", "2"],
    "progress": ["--progress", "true"],
    "precision_spelling": ["--trainer.precision", "32"],  # the default, spelled another way
    "cache_cap": ["--max_cache_gb", "10"],
    "wandb": ["--wandb", "group"],
}


@pytest.fixture(scope="module")
def done_run(tmp_path_factory: pytest.TempPathFactory, engine_root: Path) -> tuple[Path, Path]:
    """A finished tiny run folder (one job) and its config."""
    return finished_tiny_run(tmp_path_factory.mktemp("identity"), engine_root)


def copy_of(done_run: tuple[Path, Path], tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(done_run[1], out)
    return out


@pytest.mark.parametrize("case", list(IDENTITY))
def test_a_setting_that_changes_numbers_is_refused_by_an_existing_folder(tmp_path, capsys, done_run, case):
    args, names = IDENTITY[case]
    out = copy_of(done_run, tmp_path)
    before = tree(out)
    code, _, err = run_cli(["fit", "--config", str(done_run[0]), "--output_dir", str(out), *args], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "different config or data" in err and names in err, err
    assert tree(out) == before


@pytest.mark.parametrize("case", list(SPEED))
def test_a_speed_setting_is_accepted_by_an_existing_folder(tmp_path, capsys, done_run, case):
    out = copy_of(done_run, tmp_path)
    code, stdout, err = run_cli(["fit", "--config", str(done_run[0]), "--output_dir", str(out), *SPEED[case]],
                                capsys)
    assert code == 0, err
    assert "0 jobs run, 1 already done" in stdout


def test_a_folder_of_another_source_version_resumes_only_when_asked(tmp_path, capsys, done_run):
    out = copy_of(done_run, tmp_path)
    meta = json.loads((out / "run.json").read_text())
    mine = meta["code_versions"]
    assert len(mine) == 1 and mine[0]["source_sha256"]
    (out / "run.json").write_text(json.dumps({**meta, "code_versions": [OTHER_SOURCE]}))
    before = tree(out)
    more = ["--config", str(done_run[0]), "--output_dir", str(out), "--data.init_args.folds", "[0, 1]"]
    code, _, err = run_cli(["fit", *more], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--allow_code_change" in err, err
    assert tree(out) == before
    code, stdout, err = run_cli(["fit", *more, "--allow_code_change", "true"], capsys)
    assert code == 0, err
    assert "1 jobs run, 1 already done" in stdout
    versions = json.loads((out / "run.json").read_text())["code_versions"]
    assert versions == [OTHER_SOURCE, mine[0]]  # the mix is recorded, oldest first
    new = [json.loads(p.read_text()) for p in record_files(out) if "fold1" in p.parent.name]
    assert [r["code_version"] for r in new] == [mine[0]]
    # once recorded, this version resumes the folder without the flag
    assert run_cli(["fit", *more], capsys)[0] == 0


def test_the_summary_covers_the_folder_not_the_last_command(tmp_path, capsys, engine_root):
    out = tmp_path / "run"
    config = suite_config(engine_root, out, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1],
                          data={"synthetic_windows": 4})
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path)]) == 0
    first = pd.read_csv(out / "summary.csv")
    assert set(first["n_folds"]) == {2}

    # A narrower rerun: the summary still has both folds and the folder is still complete.
    assert run(["--config", str(path), "--data.init_args.folds", "[0]"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), first)
    folder = status(out)
    assert folder["complete"] and folder["planned"] == 2 and folder["completed"] == 2
    assert folder["this_command"] == {"planned": 1, "completed": 0, "skipped": 1, "failed": 0}

    # Another regime into the same folder: the first regime's rows stay as they were.
    assert run(["--config", str(path), "--trainer.callbacks", json.dumps([HALF])]) == 0
    both = pd.read_csv(out / "summary.csv")
    assert set(both["regime"]) == {"linear", "linear_frac50"}
    kept = both[both["regime"] == "linear"].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, first)
    folder = status(out)
    assert folder["complete"] and folder["planned"] == 4 and folder["records_in_folder"] == 4
    assert len(json.loads((out / "run.json").read_text())["planned_jobs"]) == 4

    # A dry run of a wider plan reads and writes nothing.
    before = tree(out)
    assert run(["--config", str(path), "--data.init_args.folds", "[0, 1, 2]", "--dry_run"]) == 0
    assert tree(out) == before


def test_a_user_callbacks_code_is_part_of_the_run_identity(tmp_path, monkeypatch):
    """Editing a callback's source gives another identity (a resume of the old folder is refused), as for
    a custom encoder; Lightning's own callbacks are covered by the package versions."""
    import linecache
    import sys

    from ppgbench_pl.benchmark.identity import callback_code

    def write(body: str) -> None:
        (tmp_path / "user_cb.py").write_text("from lightning.pytorch.callbacks import Callback\n\n\n"
                                             "class Freeze(Callback):\n    def on_train_start(self, t, m):\n"
                                             f"        {body}\n")
        sys.modules.pop("user_cb", None)
        linecache.clearcache()

    monkeypatch.syspath_prepend(str(tmp_path))
    write("return None")
    before = callback_code("user_cb.Freeze")
    write("return None")
    assert callback_code("user_cb.Freeze") == before  # the same code: the same identity
    write("return 1")
    after = callback_code("user_cb.Freeze")
    sys.modules.pop("user_cb", None)
    assert set(before) == {"code_sha256"} and before != after
    assert callback_code("lightning.pytorch.callbacks.Timer") == {}
