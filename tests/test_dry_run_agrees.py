"""The dry run makes the real run's checks of the run folder (issue 20 point 5): a folder the real run refuses
(another config, data, budget or source version) is refused by ``--dry-run`` with the same line and exit
status, and the dry run writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.benchmark.helpers import finished_tiny_run, tree
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
#: (arguments that the finished folder refuses, what the refusal says).
REFUSED = {
    "budget": (["--config", str(ROOT / "configs" / "budget" / "smoke.yaml")], "holds results of the published budget"),
    "data_setting": (["--data.init_args.n_inner_folds", "3"], "datasets.synthetic"),
    "encoder_setting": (["--model.init_args.encoder.init_args.seed", "1"], "encoders.small_cnn"),
    "regime_setting": (["--trainer.callbacks", "[{class_path: ppgbench_pl.regimes.LinearRegime, "
                                               "init_args: {binary_metric: balanced_accuracy}}]"], "regimes.linear"),
    "trainer_setting": (["--trainer.precision", "64-true"], "trainer"),
}


@pytest.fixture(scope="module")
def done_run(tmp_path_factory: pytest.TempPathFactory, engine_root: Path) -> tuple[Path, Path]:
    """A finished one-job run folder and its config."""
    return finished_tiny_run(tmp_path_factory.mktemp("dry_agrees"), engine_root)


def both(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[tuple[int, str], tuple[int, str]]:
    """((exit status, stderr) of the dry run, the same of the real run), dry run first."""
    dry = run_cli([*args, "--dry-run"], capsys)
    real = run_cli(args, capsys)
    return (dry[0], dry[2]), (real[0], real[2])


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_dry_run_refuses_what_the_run_refuses_with_the_same_line(tmp_path, capsys, done_run, case):
    config, folder = done_run
    out = tmp_path / "run"
    shutil.copytree(folder, out)
    before = tree(out)
    args, said = REFUSED[case]
    dry, real = both(["fit", "--config", str(config), "--output_dir", str(out), *args], capsys)
    assert real[0] == 2 and said in real[1] and len(real[1].strip().splitlines()) == 1, real
    assert dry == real
    assert tree(out) == before


def test_another_source_version_is_refused_alike_and_resumed_alike_when_asked(tmp_path, capsys, done_run):
    config, folder = done_run
    out = tmp_path / "run"
    shutil.copytree(folder, out)
    meta = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**meta, "code_versions": [{"ppgbench": "0", "source_sha256": "0" * 64}]}))
    before = tree(out)
    args = ["fit", "--config", str(config), "--output_dir", str(out)]
    dry, real = both(args, capsys)
    assert real[0] == 2 and "--allow_code_change" in real[1] and dry == real
    assert tree(out) == before
    code, stdout, err = run_cli([*args, "--allow_code_change", "true", "--dry-run"], capsys)
    assert code == 0, err
    assert "1 jobs planned, 1 already done, 0 to run" in stdout and tree(out) == before


def test_a_folder_the_run_accepts_is_accepted_by_the_dry_run(tmp_path, capsys, done_run):
    config, folder = done_run
    out = tmp_path / "run"
    shutil.copytree(folder, out)
    before = tree(out)
    more = ["fit", "--config", str(config), "--output_dir", str(out), "--data.init_args.folds", "[0, 1]"]
    code, stdout, err = run_cli([*more, "--dry-run"], capsys)
    assert code == 0, err
    assert "2 jobs planned, 1 already done, 1 to run" in stdout and tree(out) == before
    code, stdout, err = run_cli(more, capsys)
    assert code == 0 and "1 jobs run, 1 already done" in stdout, err


def test_an_unreadable_run_json_is_the_same_line_in_both(tmp_path, capsys, done_run):
    config, folder = done_run
    out = tmp_path / "run"
    shutil.copytree(folder, out)
    (out / "run.json").write_text("{not json")
    dry, real = both(["fit", "--config", str(config), "--output_dir", str(out)], capsys)
    assert real[0] == 2 and "run.json: cannot be read" in real[1] and dry == real
