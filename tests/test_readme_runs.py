"""Every code block of the README and docs/*.md runs as printed (issue 32 point 1); a README edit that breaks
one fails here.

How each kind of block is run:
* the two set-up commands: CI (``.ci/run``) runs them; here they must be in ``.ci/run`` verbatim;
* ``python`` blocks: in a fresh process, in an empty folder (so relative paths land there);
* ``bash`` blocks of ``ppgbench`` commands: as printed, in a folder that links the project's ``configs/`` and
  ``examples/``; commands that need a cluster (SLURM, a Dask scheduler) are parsed with ``--print_config``
  appended (nothing is contacted or written); ``dask`` daemon lines are left to the cluster tests;
* the "Your own model" block: ``tests/test_budget_smoke_path.py`` runs it on a real-format tree;
* ``yaml`` config blocks: parsed by ``ppgbench fit --print_config`` (classes checked, nothing built);
* the benchmark scripts of docs/performance.md: measured, not run in tests (the brief: speed is never a
  test); here each must exist and answer ``--help``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
CLUSTER = ("--executor submitit", "--executor dask")


def blocks(path: Path, kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(path.read_text()) if lang == kind]


def section(name: str) -> str:
    return (ROOT / "README.md").read_text().split(f"## {name}", 1)[1].split("\n## ", 1)[0]


def commands(block: str) -> list[str]:
    """The command lines of a bash block (continuations joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    return [line.split("  #", 1)[0].strip() for line in joined.splitlines() if line.strip() and
            not line.lstrip().startswith("#")]


def env() -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}


def project_folder(tmp_path: Path) -> Path:
    """An empty working folder that sees the project's configs and examples, as the README's commands assume."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("configs", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def run_ppgbench(argv: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    launch = "import sys; from ppgbench_pl.cli import main; sys.argv[0] = 'ppgbench'; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", launch, *argv], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)


def test_the_set_up_commands_are_the_ones_ci_runs() -> None:
    setup = commands(section("Set up (two commands)").split("```bash\n", 1)[1].split("```", 1)[0])
    assert len(setup) == 2
    ci = (ROOT / ".ci/run").read_text()
    for line in setup:
        assert line in ci, f".ci/run does not run the README's command: {line}"


PYTHON_BLOCKS = blocks(ROOT / "README.md", "python")


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_python_blocks_run_as_printed(index: int, tmp_path: Path) -> None:
    code = PYTHON_BLOCKS[index]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env(), capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]


def test_the_partial_finetune_command_runs_as_printed(tmp_path: Path) -> None:
    block = next(b for b in blocks(ROOT / "README.md", "bash") if "examples/partial_finetune.yaml" in b)
    (line,) = commands(block)
    out = run_ppgbench(shlex.split(line)[1:], project_folder(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "results/partial_finetune/summary.csv").is_file()
    assert "PartialFinetune" in (tmp_path / "results/partial_finetune/run.json").read_text()


def test_cluster_commands_parse_as_printed(tmp_path: Path) -> None:
    lines = [line for b in blocks(ROOT / "README.md", "bash") for line in commands(b)
             if line.startswith("ppgbench ") and any(c in line for c in CLUSTER)]
    assert len(lines) == 2
    for line in lines:
        out = run_ppgbench([*shlex.split(line)[1:], "--print_config"], project_folder(tmp_path / str(len(line))))
        assert out.returncode == 0, (line, out.stderr[-2000:])
        printed = yaml.safe_load(out.stdout)
        assert printed["executor"]["class_path"].endswith(("SubmititExecutor", "DaskExecutor"))


def _config_blocks() -> list[tuple[str, str]]:
    found = [("README.md", b) for b in blocks(ROOT / "README.md", "yaml")]
    found += [("docs/cards.md", b) for b in blocks(ROOT / "docs/cards.md", "yaml")]
    return found


MY_NET = "import torch\nfrom torch import nn\n\n\nclass MyNet(nn.Module):\n" \
         "    def __init__(self, width: int = 8) -> None:\n        super().__init__()\n" \
         "        self.conv = nn.Conv1d(1, width, 5)\n\n" \
         "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return self.conv(x).mean(-1)\n"


@pytest.mark.parametrize("where,block", _config_blocks())
def test_config_blocks_parse(where: str, block: str, tmp_path: Path) -> None:
    folder = project_folder(tmp_path)
    (folder / "mypkg").mkdir()
    (folder / "mypkg/__init__.py").write_text(MY_NET)
    (folder / "mypkg/prep.py").write_text("def bandpass(x, fs):\n    return x\n")
    config = yaml.safe_load(block)
    if "encoder" in config:  # a snippet of model.init_args (docs/cards.md)
        config = {"model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": config}}
    (folder / "block.yaml").write_text(yaml.safe_dump(config))
    out = run_ppgbench(["fit", "--config", "configs/quickstart.yaml", "--config", "block.yaml", "--print_config"],
                       folder)
    assert out.returncode == 0, (where, out.stderr[-2000:])


def test_benchmark_scripts_named_in_the_docs_exist_and_answer_help() -> None:
    scripts = sorted({m for b in blocks(ROOT / "docs/performance.md", "bash")
                      for m in re.findall(r"python (tools/\S+\.py)", b)})
    assert scripts
    for script in scripts:
        out = subprocess.run([sys.executable, str(ROOT / script), "--help"], cwd=ROOT, env=env(), capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0 and "usage" in out.stdout.lower(), (script, out.stderr[-1000:])


def test_the_report_usage_of_docs_names_real_flags() -> None:
    (usage,) = [b for b in BLOCK.findall((ROOT / "docs/report.md").read_text()) if b[1].startswith("ppgbench report")]
    out = run_ppgbench(["report", "--help"], ROOT, timeout=120)
    assert out.returncode == 0
    for flag in re.findall(r"--[\w-]+", usage[1]):
        assert flag in out.stdout, flag
