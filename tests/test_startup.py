"""Fast start: the light commands and ``import ppgbench_pl`` load none of the heavy packages.

Checked in a fresh interpreter through ``sys.modules`` (what got imported), never by timing; the
timings are in ``tools/bench_startup.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "lightning", "sklearn", "optuna", "wandb", "transformers")
PROBE = """
import json, sys
{body}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""
CLI = """
from ppgbench_pl.cli import main
try:
    main({args!r})
except SystemExit:
    pass
"""


def heavy_after(body: str, cache: Path | None = None) -> list[str]:
    """The heavy packages a fresh interpreter holds after ``body`` (``cache``: its ``XDG_CACHE_HOME``)."""
    code = PROBE.format(body=body, heavy=HEAVY)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)} if cache is not None else None
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["list"], ["list", "tasks", "--dataset", "synthetic"], ["list", "regimes"],
                                  ["list", "encoders", "--json"], ["report", "--help"], ["--help"],
                                  ["cache", "list"], ["cache", "clear"], ["leaderboard", "--help"]],
                         ids=" ".join)
def test_light_commands_import_no_heavy_package(args):
    assert heavy_after(CLI.format(args=args)) == []


def test_import_ppgbench_pl_imports_no_torch():
    assert heavy_after("import ppgbench_pl; ppgbench_pl.__version__; dir(ppgbench_pl)") == []


def test_the_api_listings_import_no_torch():
    body = "import ppgbench_pl as pb; pb.list_datasets(); pb.list_tasks(); pb.list_regimes(); " \
           "pb.list_controls()"
    assert heavy_after(body) == []


def test_fit_help_imports_only_what_its_parser_needs(tmp_path):
    """Building the help, LightningCLI needs Lightning and torch; scikit-learn, Optuna and W&B are imported by
    the jobs only. Once built, the cached help imports none of them."""
    loaded = heavy_after(CLI.format(args=["fit", "--help"]), cache=tmp_path)  # an empty cache: built
    assert {"torch", "lightning"} <= set(loaded)
    assert not {"sklearn", "optuna", "wandb"} & set(loaded)
    assert heavy_after(CLI.format(args=["fit", "--help"]), cache=tmp_path) == []


def test_bench_startup_tool_measures_cpu_and_checks_each_answer():
    """The tool's figures are CPU seconds with the limit of issue 20; a command whose answer changed fails."""
    args = ["--repeat", "1", "--commands", "import ppgbench_pl", "refusal: unknown command", "--quick", "--json"]
    out = subprocess.run([sys.executable, str(ROOT / "tools/bench_startup.py"), *args], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    report = json.loads(out.stdout)
    row = report["commands"]["import ppgbench_pl"]
    assert row["heavy"] == [] and row["import_s"] > 0 and row["cpu_s"] > 0 and row["limit_cpu_s"] == 2.0
    refusal = report["commands"]["refusal: unknown command"]
    assert refusal["problem"] == "" and refusal["heavy"] == []  # exit status 2 and "did you mean", as expected
    assert "import lightning.pytorch" not in report["baselines"]  # --quick: no Lightning baseline


def test_bench_startup_covers_every_command_point_4_names(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_startup", ROOT / "tools/bench_startup.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_startup", tool)  # its dataclasses look their module up
    spec.loader.exec_module(tool)
    kinds = {name: command.kind for name, command in tool.COMMANDS.items()}
    for name in ("help", "list", "cache list", "cite", "fit --help (cached)", "refusal: --config missing"):
        assert kinds[name] == "light"
    for name in ("dry run", "config error", "trainer refusal"):
        assert kinds[name] == "lightning"


def _tool(monkeypatch, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"tools/{name}.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, tool)
    spec.loader.exec_module(tool)
    return tool


def test_bench_startup_names_who_imported_each_heavy_package(monkeypatch):
    """``--fit`` reads ``-X importtime``: a module's importer is the next line below it that is less indented."""
    tool = _tool(monkeypatch, "bench_startup")
    stderr = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       900 |     500000 |           transformers",
        "import time:        10 |     510000 |         torchmetrics.functional.text.bert",
        "import time:        10 |     800000 |       torchmetrics.functional",
        "import time:        10 |     900000 |     torchmetrics",
        "import time:        10 |    1000000 |   lightning.fabric",
        "import time:        10 |    1100000 | lightning",
        "import time:        20 |         20 | json",
    ])
    chains = tool.import_chains(stderr, ("transformers", "matplotlib"))
    assert chains == {"transformers": (0.5, ["torchmetrics.functional.text.bert", "torchmetrics.functional",
                                             "torchmetrics", "lightning.fabric", "lightning"])}


def test_a_linear_fit_imports_no_search_tracking_or_forest_package(tmp_path):
    """The linear probe needs Lightning and scikit-learn's linear models: Optuna, W&B and the forests stay out."""
    config = tmp_path / "linear.yaml"
    config.write_text(
        "model: {class_path: ppgbench_pl.tasks.EncoderTask, init_args: {encoder: "
        "{class_path: ppgbench_pl.encoders.cnn.SmallCNNEncoder}}}\ncontrols: []\n"
        "data: {class_path: ppgbench_pl.datamodules.PPGDataModule, init_args: {dataset: synthetic, "
        f"root: {tmp_path / 'data'}, tasks: [synthetic-hr], seeds: [42], folds: [0], synthetic_subjects: 10, "
        "synthetic_windows: 4}}\ntrainer: {accelerator: cpu, callbacks: [{class_path: ppgbench_pl.regimes.LinearRegime}]}\n")
    args = ["fit", "--config", str(config), "--output_dir", str(tmp_path / "run"), "--wandb", "off",
            "--cache_dir", str(tmp_path / "cache")]
    names = ("torch", "lightning", "sklearn.linear_model", "optuna", "wandb", "sklearn.ensemble")
    code = PROBE.format(body=CLI.format(args=args), heavy=names)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "run" / "summary.csv").exists()  # the fit ran
    assert json.loads(out.stdout.splitlines()[-1]) == ["lightning", "sklearn.linear_model", "torch"]
