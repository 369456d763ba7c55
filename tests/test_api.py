"""The Python API runs the CLI's engine: same records, same resume, any nn.Module, any run folder read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ppgbench_pl as pb
from ppgbench_pl.errors import ConfigError, DataError
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
TINY = {"synthetic_subjects": 8, "synthetic_windows": 4, "accelerator": "cpu", "devices": 1,
        "progress": False}
TIMING = ("seconds", "cpu_seconds", "worker")


def records(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(run_dir.glob("jobs/*/results.json")):
        record = json.loads(path.read_text())
        out[record["job_id"]] = {k: v for k, v in record.items() if k not in TIMING}
    return out


def test_one_cell_through_the_api_and_the_cli_gives_the_same_records_and_resumes(tmp_path, capsys):
    root = tmp_path / "data"
    code, _, err = run_cli([
        "fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--output_dir", str(tmp_path / "cli"),
        "--data.init_args.root", str(root), "--data.init_args.synthetic_subjects", "8",
        "--data.init_args.synthetic_windows", "4", "--data.init_args.seeds", "[42]",
        "--data.init_args.folds", "[0]", "--data.init_args.tasks", "[synthetic-hr]", "--controls", "[]",
        "--wandb", "off", "--progress", "false",
    ], capsys)
    assert code == 0, err
    cell = {"dataset": "synthetic", "tasks": ["synthetic-hr"], "controls": (), "seeds": [42], "folds": [0]}
    res = pb.evaluate("small_cnn", **cell, output_dir=tmp_path / "api", root=str(root), **TINY)
    cli, api = records(tmp_path / "cli"), records(tmp_path / "api")
    assert len(api) == 1 and api == cli
    identity = [json.loads((tmp_path / run / "run.json").read_text())["identity"] for run in ("cli", "api")]
    assert identity[0] == identity[1]  # one folder could hold both runs' results
    assert res.run is not None and (res.run.completed, res.run.skipped) == (1, 0)

    assert "resumed" not in capsys.readouterr().err  # a fresh folder reuses nothing
    again = pb.evaluate("small_cnn", **cell, output_dir=tmp_path / "api", root=str(root), **TINY)
    assert again.run is not None and (again.run.completed, again.run.skipped) == (0, 1)
    said = capsys.readouterr().err.splitlines()
    assert f"resumed {tmp_path / 'api'}: 1 of 1 jobs reused (already done), 0 run" in said  # one line says so
    assert records(tmp_path / "api") == api

    jobs = again.jobs
    assert list(jobs["job_id"]) == list(api) and jobs.loc[0, "status"] == "ok"
    assert jobs.loc[0, "value"] == pytest.approx(api[jobs.loc[0, "job_id"]]["results"][0]["metrics"]["mae"])
    assert "param.alpha" in jobs.columns and jobs.loc[0, "params"] == {"alpha": jobs.loc[0, "param.alpha"]}
    summary = again.summary
    assert set(summary["model"]) == {"small_cnn", "constant"} and (summary["n_folds"] == 1).all()
    preds = again.predictions("synthetic-hr__linear__seed42__fold0")  # a unique suffix is enough
    assert {"y_true", "y_pred"} <= set(preds) and len(preds["y_true"]) == len(preds["y_pred"]) > 0


class TinyNet(nn.Module):
    """A user's model: [B, 1, T] -> [B, 8] (conv, pool)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(1, 8, 9, stride=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).relu().mean(dim=-1)


def test_a_plain_module_is_wrapped_run_and_read_back_with_load_run(tmp_path):
    run = tmp_path / "run"
    res = pb.evaluate(TinyNet(), sampling_rate=64, name="tiny", dataset="synthetic",
                      tasks="synthetic-activity", controls=(), seeds=[42], folds=[0, 1], output_dir=run,
                      root=str(tmp_path / "data"),
                      encoder_args={"normalize": "window_zscore"}, **TINY)
    jobs = res.jobs
    assert set(jobs["model"]) == {"tiny"} and (jobs["status"] == "ok").all() and len(jobs) == 2
    loaded = pb.load_run(run)
    assert loaded.run is None and list(loaded.jobs["job_id"]) == list(jobs["job_id"])
    assert loaded.summary.equals(res.summary)
    index = loaded.report(tmp_path / "report")
    assert index.name == "index.html" and index.exists()
    meta = json.loads((run / "run.json").read_text())
    assert meta["identity"]["encoders"]["tiny"]["class"] == "ppgbench_pl.encoders.custom.CustomEncoder"


def test_a_regime_instance_runs_as_its_entry_would(tmp_path):
    from ppgbench_pl.regimes import LinearRegime

    cell = {"dataset": "synthetic", "tasks": ["synthetic-hr"], "controls": (), "seeds": [42], "folds": [0],
            "root": str(tmp_path / "data"), **TINY}
    by_name = pb.evaluate("small_cnn", regimes="linear", output_dir=tmp_path / "name", **cell)
    built = pb.evaluate("small_cnn", regimes=[LinearRegime()], output_dir=tmp_path / "instance", **cell)
    assert records(tmp_path / "name") == records(tmp_path / "instance")
    assert built.jobs["value"].tolist() == by_name.jobs["value"].tolist()


def test_built_objects_need_the_local_executor_and_modules_need_a_rate(tmp_path):
    with pytest.raises(ConfigError, match="local executor"):
        pb.evaluate(TinyNet(), sampling_rate=64, dataset="synthetic", controls=(), executor="process",
                    output_dir=tmp_path / "run", root=str(tmp_path / "data"))
    with pytest.raises(ConfigError, match="needs sampling_rate"):
        pb.evaluate(TinyNet(), dataset="synthetic", output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"regimes": ("linear", "mpl")}, "unknown regime 'mpl'; did you mean 'mlp'"),
    ({"bach_size": 8}, "unknown option 'bach_size'; did you mean 'batch_size'"),
    ({"max_epochs": 3}, "trainer.max_epochs=3: max_epochs is set by each regime's search budget"),
    ({"tasks": ["dalia-hr"]}, "task 'dalia-hr' belongs to dataset 'dalia'"),
])
def test_bad_arguments_are_one_line_config_errors(tmp_path, kwargs, message):
    with pytest.raises(ConfigError) as info:
        pb.evaluate("small_cnn", dataset="synthetic", output_dir=tmp_path / "run", **kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_config_speaks_the_cli_language():
    from ppgbench_pl.api import build_config
    from ppgbench_pl.datamodules.ppg import DEFAULT_SEEDS

    config = build_config("papagei_s", dataset="synthetic", regimes=("mlp", {"search": {"n_trials": 2}}),
                          encoder_args={"random_init": True})
    assert config["model"]["init_args"]["encoder"] == {
        "class_path": "ppgbench_pl.encoders.papagei.PaPaGeiSEncoder", "init_args": {"random_init": True}}
    assert config["controls"] == [{"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder"}]
    assert config["trainer"]["callbacks"] == [{"class_path": "ppgbench_pl.regimes.MLPRegime",
                                               "init_args": {"search": {"n_trials": 2}}}]
    assert config["data"]["init_args"]["seeds"] == DEFAULT_SEEDS == list(pb.PUBLISHED_SEEDS)
    assert config["data"]["init_args"]["folds"] == [0, 1, 2, 3, 4]
    assert config["executor"] == {"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor"}


def test_load_run_refuses_what_is_not_a_run_folder(tmp_path):
    with pytest.raises(DataError, match="no such run folder"):
        pb.load_run(tmp_path / "nope")
    with pytest.raises(DataError, match="not a run folder"):
        pb.load_run(tmp_path)
    (tmp_path / "jobs" / "x").mkdir(parents=True)
    with pytest.raises(DataError, match="no job 'y'"):
        pb.load_run(tmp_path).predictions("y")


def test_catalog_tables_are_dataframes():
    tasks = pb.list_tasks(dataset="synthetic")
    assert set(tasks["name"]) == {"synthetic-hr", "synthetic-activity", "synthetic-stiffness",
                                  "synthetic-age"}
    assert {"linear", "rf", "mlp", "finetune"} <= set(pb.list_regimes()["name"])
    assert "synthetic" in set(pb.list_datasets()["key"])
    assert "prv_published" in set(pb.list_controls()["name"])


def test_encoders_are_listed():
    pytest.importorskip("ppgbench_pl.encoders.catalog", reason="the encoder catalog is not written yet")
    encoders = pb.list_encoders()
    assert {"papagei_s", "small_cnn"} <= set(encoders["name"])


def readme_api_section() -> str:
    """The README's section whose heading says "Python API" (headings inside code fences do not count)."""
    out, inside, fence = [], False, False
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        heading = not fence and re.match(r"#{1,6} ", line)
        if heading:
            inside = "Python API" in line
            continue
        if inside:
            out.append(line)
    return "\n".join(out)


def test_every_public_name_and_every_name_the_readme_shows_is_importable():
    for name in pb.__all__:
        assert getattr(pb, name) is not None
    section = readme_api_section()
    if not section.strip():
        pytest.skip("README.md has no Python API section yet")
    names = set(re.findall(r"\b(?:pb|ppgbench_pl)\.([A-Za-z_]\w*)", section)) - {"api"}
    for group in re.findall(r"from ppgbench_pl import \(?([\w, \n]+)\)?", section):
        names |= {n.strip() for n in group.replace("\n", ",").split(",") if n.strip()}
    missing = sorted(n for n in names if not hasattr(pb, n))
    assert not missing, f"README shows ppgbench_pl names that do not exist: {missing}"
    attributes = set(re.findall(r"\b(?:res|results|run)\.([A-Za-z_]\w*)", section))
    unknown = sorted(a for a in attributes if a != "run_dir" and not hasattr(pb.Results, a))
    assert not unknown, f"README shows Results attributes that do not exist: {unknown}"


def test_the_package_imports_without_torch():
    code = "import sys, ppgbench_pl; ppgbench_pl.__version__; dir(ppgbench_pl); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_predictions_round_trip(tmp_path):
    from ppgbench_pl.api import Results
    from ppgbench_pl.results.records import write_job

    jid = "abc__t__linear__seed1__fold0"
    arrays = {"y_true": np.arange(3), "y_pred": np.ones(3)}
    write_job(tmp_path, jid, {"job_id": jid, "status": "ok"}, {"predictions_repeat0.npz": arrays})
    preds = Results(tmp_path).predictions("abc__t__linear__seed1__fold0")
    assert preds["y_true"].tolist() == [0, 1, 2]
    with pytest.raises(DataError, match="no predictions for repeat 1"):
        Results(tmp_path).predictions("abc__t__linear__seed1__fold0", repeat=1)


def test_the_api_default_devices_are_ones_the_stacked_regimes_accept(tmp_path, capsys):
    """The README's call without ``devices``: its MLP stack was refused (``trainer.devices 'auto'``)."""
    from ppgbench_pl.api import build_config

    config = build_config("small_cnn", dataset="synthetic", regimes=("linear", "mlp"), seeds=[42], folds=[0])
    assert config["trainer"]["devices"] == 1
    assert pb.evaluate("small_cnn", dataset="synthetic", regimes=("linear", "mlp"), seeds=[42], folds=[0, 1],
                       output_dir=tmp_path / "demo", root=str(tmp_path / "data"), dry_run=True) is None
    assert "mlp" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="devices"):  # asking for more is still refused in one line
        pb.evaluate("small_cnn", dataset="synthetic", regimes=("mlp",), seeds=[42], folds=[0], devices="auto",
                    output_dir=tmp_path / "auto", root=str(tmp_path / "data"), dry_run=True)
