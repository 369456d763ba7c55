"""The plan of the published suite, from the registry and the config alone (--dry_run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.benchmark.helpers import run
from tests.cli_helpers import run_cli

REPO = Path(__file__).resolve().parents[2]
BENCHMARK = str(REPO / "configs/benchmark.yaml")


def table(text: str) -> dict[str, dict[str, int]]:
    lines = text.strip().splitlines()
    head = lines[0].split()[1:]
    out = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == len(head) + 1 and all(p.isdigit() for p in parts[1:]):
            out[parts[0]] = dict(zip(head, map(int, parts[1:]), strict=True))
    return out


@pytest.mark.parametrize("command", ["benchmark", "fit"])
def test_full_suite_is_2150_jobs_per_model_without_touching_data(tmp_path, capsys, command):
    root, out = tmp_path / "no_data", tmp_path / "run"
    code = run(["--config", BENCHMARK, "--dry_run", "--data.init_args.root", str(root), "--output_dir", str(out)],
               command)
    assert code == 0
    rows = table(capsys.readouterr().out)
    models = [m for m in rows if m != "total"]
    assert len(models) == 7  # five foundation models + the published PRV + MOMENT; no checkpoint exists here
    for model in models:
        assert rows[model] == {"linear": 650, "rf": 650, "mlp": 425, "finetune": 425, "total": 2150}
    assert rows["total"]["total"] == 2150 * len(models)
    assert not root.exists() and not out.exists()


def test_options_select_encoders_regimes_datasets_seeds_and_folds(capsys):
    code = run(["--config", BENCHMARK, "--dry-run", "--only_encoders", "[prv_published]",
                "--only_regimes", "[linear, mlp]", "--matrix.datasets", "[ppgbp, bidmc]",
                "--data.init_args.seeds", "[42, 43]", "--data.init_args.folds", "[0]"])
    assert code == 0
    text = capsys.readouterr().out
    rows = table(text)
    # ppgbp: 7 primary + 3 secondary tasks; bidmc: 2 primary. MLP runs primary tasks only.
    assert rows["prv_published"] == {"linear": 12 * 2, "mlp": 9 * 2, "total": 21 * 2}
    assert "datasets: ppgbp, bidmc" in text and re.search(r"42 jobs planned, 0 already done", text)


@pytest.mark.parametrize(("override", "message"), [
    (["--only_regimes", "[lineer]"], "unknown regime lineer"),
    (["--only_encoders", "[nobody]"], "unknown encoder nobody"),
    (["--matrix.tasks", "[dalia-hr]", "--matrix.datasets", "[ppgbp]"], "dalia-hr"),
])
def test_bad_selection_is_one_line_config_error(capsys, override, message):
    code, _, err = run_cli(["benchmark", "--config", BENCHMARK, "--dry_run", *override], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_synthetic_config_plans_all_four_regimes(capsys):
    assert run(["--config", str(REPO / "configs/benchmark_synthetic.yaml"), "--dry_run"]) == 0
    rows = table(capsys.readouterr().out)
    # 4 synthetic tasks (3 primary), 2 seeds x 5 folds
    expected = {"linear": 40, "rf": 40, "mlp": 30, "finetune": 30, "total": 140}
    assert rows["small_cnn"] == expected and rows["prv_published"] == expected


def test_optuna_storage_reaches_regimes_that_take_one(tmp_path):
    from ppgbench_pl.benchmark.preflight import redact
    from tests.benchmark.helpers import suite_config, suite_of

    url = "postgresql://me:secret@db.example/optuna"
    config = suite_config(tmp_path / "data", tmp_path / "run", regimes=[
        {"class_path": "ppgbench_pl.regimes.LinearRegime"}, {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime"}],
        optuna_storage=url)
    linear, mlp = suite_of(config).regimes
    assert mlp.search.storage == url and not hasattr(linear, "search")
    assert "secret" not in redact(config)["optuna_storage"] and "me:***@db.example" in redact(config)["optuna_storage"]
