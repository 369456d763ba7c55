import argparse
import subprocess
import sys

import pandas as pd
import pytest

from ppgbench_pl.commands.report import add_report_parser
from ppgbench_pl.errors import PPGBenchError
from tests.report.fabricate import write_showcase_run


def _parse(argv):
    parser = argparse.ArgumentParser(prog="ppgbench")
    add_report_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["report", *argv])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("cmd") / "run"
    write_showcase_run(path)
    return path


def test_report_command_writes_the_folder_and_prints_findings(run, tmp_path, capsys):
    out = tmp_path / "rep"
    ns = _parse([str(run), "--output", str(out), "--baseline-rule", "mean", "--compare", "P:moment_small",
                 "--ci-unit", "seed"])
    ns.func(ns)
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"report: {out / 'index.html'}"
    assert printed[0].endswith("cells are near chance: no model meaningfully beats the constant baseline.")
    assert any(line.startswith("Meaningfully better = better mean (no uncertainty") for line in printed)
    paired = pd.read_csv(out / "tables" / "paired.csv")
    assert set(zip(paired["model_a"], paired["model_b"], strict=True)) == {("P", "moment_small")}
    assert (out / "tables" / "main_linear.tex").exists() and (out / "figures" / "cd_mlp.svg").exists()


def test_report_command_rejects_bad_arguments(run, tmp_path):
    with pytest.raises(SystemExit):
        _parse([str(run), "--compare", "P-prv_neurokit2"])
    with pytest.raises(SystemExit):
        _parse([str(run), "--baseline-rule", "vibes"])
    ns = _parse([str(run), "--output", str(tmp_path / "x"), "--alpha", "2"])
    with pytest.raises(PPGBenchError, match="--alpha"):
        ns.func(ns)
    ns = _parse([str(run), "--output", str(tmp_path / "x"), "--compare", "P:prvv"])
    with pytest.raises(PPGBenchError, match="unknown model.*prvv; these runs have P, prv_neurokit2, moment_small"):
        ns.func(ns)
    ns = _parse([str(tmp_path / "missing"), "--output", str(tmp_path / "x")])
    with pytest.raises(PPGBenchError, match="no such run folder"):
        ns.func(ns)


def test_report_layer_never_imports_torch_or_lightning(run, tmp_path):
    code = (
        "import sys\n"
        "from ppgbench_pl.commands.report import add_report_parser\n"
        "from ppgbench_pl.report import build_report\n"
        f"build_report([{str(run)!r}], {str(tmp_path / 'r')!r})\n"
        "roots = ('torch', 'lightning', 'pytorch_lightning')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in roots)\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            check=True)
    assert result.stdout.strip() == "[]"
