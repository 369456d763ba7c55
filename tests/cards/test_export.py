"""``ppgbench export``: a versioned file per model that validates, reads back, and reports like its run.

Two small real runs (the API's engine, the linear regime, 2 seeds x 1 fold on a tiny synthetic set): one
of ``small_cnn`` and one of a custom module declaring its pretraining data. Their exported files must
validate against ``docs/schema/``, give the same report as the run folders (every table but the
rescoring, which needs prediction arrays), load with ``pb.load_run``, and refuse a changed protocol.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from torch import nn

import ppgbench_pl as pb
from ppgbench_pl.cli import main
from ppgbench_pl.errors import DataError, PPGBenchError
from ppgbench_pl.report import build_report
from ppgbench_pl.results.export import FORMAT_VERSION, export_run
from tests.schema_check import validate

TINY = {"synthetic_subjects": 8, "synthetic_windows": 4, "accelerator": "cpu", "devices": 1, "progress": False}
CELL = {"dataset": "synthetic", "tasks": ["synthetic-hr", "synthetic-stiffness"], "seeds": [42, 43],
        "folds": [0]}


class Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 9, stride=4)

    def forward(self, x):
        return self.conv(x).mean(dim=-1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    data = str(root / "data")
    pb.evaluate("small_cnn", **CELL, output_dir=root / "a", root=data, **TINY)
    pb.evaluate(Pooled(), sampling_rate=64, name="mynet", **CELL, output_dir=root / "b", root=data,
                encoder_args={"weights_in_module": True, "pretraining_data": ["mesa"]}, **TINY)
    files = [export_run(root / "a", root / "a.ppgbench.json"), export_run(root / "b", root / "b.ppgbench.json")]
    return root, files


def test_the_exported_file_and_every_record_validate_against_the_schemas(runs):
    root, files = runs
    for path in files:
        document = json.loads(path.read_text())
        assert validate(document, "ppgbench-results.schema.json") == []
        assert document["format_version"] == FORMAT_VERSION
        cell = next(c for c in document["cells"] if c["model"] == document["model"] and c["task"] == "synthetic-hr")
        assert cell["n_seeds"] == 2 and len(cell["fold_values"]) == 2 and len(cell["seed_values"]) == 2
    for path in sorted((root / "a").glob("jobs/*/results.json")):
        assert validate(json.loads(path.read_text()), "results.schema.json") == [], path
    card = json.loads(files[1].read_text())["model_card"]
    assert card["pretraining_data"] == [{"name": "mesa", "status": "confirmed"}]


def test_a_report_on_the_files_equals_the_report_on_the_folders(runs):
    root, files = runs
    from_dirs = build_report([root / "a", root / "b"], root / "rep_dirs").parent
    from_files = build_report(files, root / "rep_files").parent
    for name in ("main_cells.csv", "main_linear.md", "main_linear.tex", "chance_cells.csv", "control_cells.csv",
                 "paired.csv", "overlap_cells.csv"):
        assert (from_files / "tables" / name).read_text() == (from_dirs / "tables" / name).read_text(), name
    assert (from_files / "references.bib").read_text() == (from_dirs / "references.bib").read_text()
    columns = ["model", "task", "regime", "mean", "ci95", "n_seeds", "n_folds", "pretraining_overlap"]
    pd.testing.assert_frame_equal(pb.load_run(files[0]).summary[columns], pb.load_run(root / "a").summary[columns],
                                  check_dtype=False)


def test_load_run_reads_a_file_and_says_it_has_no_predictions(runs):
    _, files = runs
    res = pb.load_run(files[1])
    assert set(res.summary["model"]) >= {"mynet", "constant"} and len(res.jobs) == len(res.records())
    with pytest.raises(DataError, match=r"exported file carries no predictions"):
        res.predictions(res.jobs.job_id[0])


def test_a_file_with_other_protocol_settings_is_refused_in_one_line(runs, tmp_path):
    root, files = runs
    document = json.loads(files[1].read_text())
    document["protocol"]["datasets.synthetic.n_folds"] = "10"
    changed = tmp_path / "changed.ppgbench.json"
    changed.write_text(json.dumps(document))
    with pytest.raises(PPGBenchError, match=r"^\S*changed.ppgbench.json: protocol setting "
                                            r"datasets.synthetic.n_folds is 10, but \S+ has 5;"):
        build_report([files[0], changed], tmp_path / "rep")
    with pytest.raises(PPGBenchError, match="protocol setting datasets.synthetic.n_folds"):
        build_report([root / "a", changed], tmp_path / "rep")


@pytest.mark.parametrize("content, message", [
    ("{", "not valid JSON"),
    ('{"format": "other"}', "not a ppgbench results file"),
    ('{"format": "ppgbench.results", "format_version": 99, "model": "m", "protocol": {}, "cells": [], '
     '"records": []}', "format_version 99 is not one this ppgbench reads"),
    ('{"format": "ppgbench.results", "format_version": 1, "model": "m", "protocol": {}, "cells": []}',
     "missing field 'records'"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path, capsys, content, message):
    path = tmp_path / "bad.ppgbench.json"
    path.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(path), "--output", str(tmp_path / "rep")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert str(path) in err and message in err


def test_the_command_writes_the_file_and_refuses_an_ambiguous_run(runs, tmp_path, capsys):
    root, _ = runs
    out = tmp_path / "m.ppgbench.json"
    main(["export", str(root / "a"), "--output", str(out)])
    assert f"exported: {out}" in capsys.readouterr().out and json.loads(out.read_text())["model"] == "small_cnn"
    with pytest.raises(SystemExit):
        main(["export", str(root / "a"), "--model", "nope"])
    assert "no completed jobs of model 'nope'" in capsys.readouterr().err


def test_cite_prints_bibtex_for_what_is_named(capsys):
    from ppgbench_pl.cards import bibtex

    main(["cite", "--datasets", "bidmc", "dalia", "--models", "papagei_p", "papagei_s", "small_cnn"])
    entries = bibtex.parse(capsys.readouterr().out)
    assert set(entries) == {"ppgbench", "pimentel2017bidmc", "reiss2019deepppg", "pillai2025papagei"}
    with pytest.raises(SystemExit):
        main(["cite", "--datasets", "bidmcc"])
    assert "did you mean bidmc" in capsys.readouterr().err


def test_schemas_are_json(tmp_path):
    for path in (Path(__file__).resolve().parents[2] / "docs" / "schema").glob("*.json"):
        json.loads(path.read_text())
