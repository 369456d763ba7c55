"""``ppgbench export``: a versioned file per model that validates, reads back, and reports like its run.

Two small real runs (the API's engine, the linear regime, 2 seeds x 1 fold on a tiny synthetic set): one
of ``small_cnn`` and one of a custom module declaring its pretraining data. Their exported files must
validate against ``docs/schema/``, give the same report as the run folders (every file of it, the
rescoring table built from the predictions the files carry included), load with ``pb.load_run`` (the
predictions too), and refuse a changed protocol. A format version 1 file (no predictions) still reads.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from torch import nn

import ppgbench_pl as pb
from ppgbench_pl.cli import main
from ppgbench_pl.errors import DataError, PPGBenchError
from ppgbench_pl.report import build_report
from ppgbench_pl.results.export import FORMAT_VERSION, export_run
from ppgbench_pl.results.schemas import errors as validate
from tests.cards.bib_parse import pybtex_entries

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


def report_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("interval", ["corrected-t", "bootstrap"])  # the bootstrap reads the predictions too
def test_a_report_on_the_files_equals_the_report_on_the_folders(runs, interval):
    root, files = runs
    from_dirs = report_files(build_report([root / "a", root / "b"], root / f"rep_dirs_{interval}",
                                          subject_interval=interval).parent)
    from_files = report_files(build_report(files, root / f"rep_files_{interval}", subject_interval=interval).parent)
    assert set(from_files) == set(from_dirs) and "tables/rescoring.csv" in from_dirs
    page = from_dirs.pop("index.html").decode()  # names its inputs: the folders there, the files here
    page = page.replace(f"{root / 'a'}, {root / 'b'}", f"{files[0]}, {files[1]}")
    assert from_files.pop("index.html").decode() == page
    for name, content in from_dirs.items():
        assert from_files[name] == content, name
    # The quickstart's makeup (small CNN, published PRV, constant, synthetic): only the benchmark has a paper.
    assert set(pybtex_entries(from_files["references.bib"].decode())) == {"ppgbench"}
    rescored = pd.read_csv(root / f"rep_files_{interval}" / "tables" / "rescoring.csv")
    assert set(rescored["model"]) == {"small_cnn", "mynet", "prv_published"} and set(rescored["task"]) == {"synthetic-stiffness"}
    assert "carries no predictions" not in page
    columns = ["model", "task", "regime", "mean", "ci95", "n_seeds", "n_folds", "pretraining_overlap"]
    pd.testing.assert_frame_equal(pb.load_run(files[0]).summary[columns], pb.load_run(root / "a").summary[columns],
                                  check_dtype=False)


def test_load_run_reads_a_file_and_its_predictions_equal_the_folders(runs):
    root, files = runs
    res, folder = pb.load_run(files[1]), pb.load_run(root / "b")
    assert set(res.summary["model"]) >= {"mynet", "constant"} and len(res.jobs) == len(res.records())
    for job in (*res.jobs.job_id, -1):
        mine, theirs = res.predictions(job), folder.predictions(job)
        assert set(mine) == set(theirs) >= {"y_true", "subjects", "y_pred"}
        for name, array in theirs.items():
            assert mine[name].dtype == array.dtype and np.array_equal(mine[name], array), (job, name)
    with pytest.raises(DataError, match=r"saved no predictions for repeat 3$"):
        res.predictions(0, repeat=3)


def version_1(path: Path, out: Path) -> Path:
    """The file as ppgbench wrote it before predictions were exported (format version 1)."""
    document = json.loads(path.read_text())
    del document["predictions"]
    document["format_version"] = 1
    out.write_text(json.dumps(document))
    return out


def test_a_version_1_file_still_reads_without_table_4_and_says_so(runs, tmp_path):
    root, files = runs
    old = version_1(files[1], tmp_path / "old.ppgbench.json")
    assert validate(json.loads(old.read_text()), "ppgbench-results.v1.schema.json") == []
    assert validate(json.loads(old.read_text()), "ppgbench-results.schema.json") != []
    index = build_report([files[0], old], tmp_path / "rep")
    rescored = pd.read_csv(tmp_path / "rep" / "tables" / "rescoring.csv")
    assert set(rescored["model"]) == {"small_cnn", "prv_published"}  # mynet's (old's) have no arrays
    assert f"{old}: an exported results file of format version 1 carries no predictions" in index.read_text()
    with pytest.raises(DataError, match=r"^\S*old.ppgbench.json: an exported file of format version 1 "
                                        r"carries no predictions; open the run folder"):
        pb.load_run(old).predictions(0)


def test_a_damaged_array_in_a_file_is_one_line_and_leaves_its_job_out(runs, tmp_path):
    _, files = runs
    document = json.loads(files[1].read_text())
    job = next(j for j in document["predictions"] if "synthetic-stiffness" in j)
    document["predictions"][job]["predictions_repeat0.npz"]["y_prob"]["zlib_base64"] = "eNo="
    damaged = tmp_path / "damaged.ppgbench.json"
    damaged.write_text(json.dumps(document))
    index = build_report([damaged], tmp_path / "rep")
    assert (f"{damaged}: job {job} predictions_repeat0.npz: array 'y_prob': 'zlib_base64' does not decode"
            in html.unescape(index.read_text()))
    with pytest.raises(DataError, match=r"array 'y_prob': 'zlib_base64' does not decode"):
        pb.load_run(damaged).predictions(job)


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
     "field $: 'created' is a required property"),
    ('{"format": "ppgbench.results", "format_version": 2, "model": "m", "protocol": {}, "cells": [], '
     '"records": []}', "field $: 'created' is a required property"),
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
    main(["cite", "--datasets", "bidmc", "dalia", "--models", "papagei_p", "papagei_s", "small_cnn"])
    entries = pybtex_entries(capsys.readouterr().out)
    assert set(entries) == {"ppgbench", "pimentel2017bidmc", "reiss2019deepppg", "pillai2025papagei"}
    with pytest.raises(SystemExit):
        main(["cite", "--datasets", "bidmcc"])
    assert "did you mean bidmc" in capsys.readouterr().err


def test_the_schemas_are_valid_and_resolve_each_other_through_the_registry(runs):
    """Each schema is a valid 2020-12 schema; the export's ``$ref`` to ``results.schema.json`` resolves (offline,
    through the registry docs/schema/README.md shows) and is applied: a bad record fails the export schema."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    from ppgbench_pl.results import schemas

    for name in schemas.NAMES:
        Draft202012Validator.check_schema(schemas.load(name))
    # the README's recipe, verbatim in spirit: every schema under its $id
    loaded = [schemas.load(n) for n in schemas.NAMES]
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in loaded)
    validator = Draft202012Validator(schemas.load(schemas.EXPORT), registry=registry)
    document = json.loads(runs[1][0].read_text())
    assert list(validator.iter_errors(document)) == []
    document["records"][0]["kind"] = "astrology"  # only results.schema.json says what a kind is
    assert [e.json_path for e in validator.iter_errors(document)] == ["$.records[0].kind"]


def test_a_prediction_file_missing_from_the_run_is_named_and_left_out_of_table_4_both_ways(runs, tmp_path):
    import shutil

    root, _ = runs
    run = shutil.copytree(root / "b", tmp_path / "b")
    gone = sorted(run.glob("jobs/*synthetic-stiffness*seed42*/predictions_repeat0.npz"))[0]
    gone.unlink()
    lines: list[str] = []
    exported = export_run(run, tmp_path / "b.ppgbench.json", warn=lines.append)
    assert lines == [f"{gone}: missing; not carried (the report leaves the job out of Table 4)"]
    document = json.loads(exported.read_text())
    assert validate(document, "ppgbench-results.schema.json") == []
    assert document["predictions_left_out"] == [f"jobs/{gone.parent.name}/{gone.name}: missing"]  # no local path
    from_dir = build_report([run], tmp_path / "rep_dir").read_text()
    from_file = build_report([exported], tmp_path / "rep_file").read_text()
    assert f"{gone}: predictions file missing (left out of Table 4)" in from_dir
    assert (f"{exported}: job {gone.parent.name} predictions_repeat0.npz: predictions file missing "
            "(left out of Table 4)") in from_file
    tables = ("rescoring.csv", "rescoring_jobs.csv")
    for name in tables:
        assert ((tmp_path / "rep_file" / "tables" / name).read_text()
                == (tmp_path / "rep_dir" / "tables" / name).read_text())


def test_the_subject_bootstrap_reads_the_same_arrays_from_a_file_as_from_its_folder(runs):
    from ppgbench_pl.report.load import load_runs
    from ppgbench_pl.report.two_level_rows import seed_stats

    root, files = runs
    folder, exported = load_runs([root / "b"]), load_runs([files[1]])
    for task, kind, classes in (("synthetic-stiffness", "classification", [0, 1]),
                                ("synthetic-hr", "regression", [])):
        recs = [r for r in folder.records if r["model"] == "mynet" and r["task"] == task]
        mine = seed_stats(exported, [r for r in exported.records if r["job_id"] in {x["job_id"] for x in recs}],
                          kind, classes)
        theirs = seed_stats(folder, recs, kind, classes)
        assert set(mine) == set(theirs) == {42, 43}, task  # every seed read (none left out as unreadable)
        for seed, (names, stats) in theirs.items():
            assert list(mine[seed][0]) == list(names) and np.array_equal(mine[seed][1], stats)


QUICKSTART = Path(__file__).resolve().parents[2] / "results" / "quickstart"  # .ci/run makes it before the tests


@pytest.mark.skipif(not (QUICKSTART / "run.json").is_file(), reason="no quickstart run in results/quickstart "
                    "(ppgbench fit --config configs/quickstart.yaml makes it; .ci/run does so first)")
def test_the_quickstart_exports_to_a_file_that_validates(tmp_path):
    lines: list[str] = []
    path = export_run(QUICKSTART, tmp_path / "small_cnn.ppgbench.json", warn=lines.append)
    document = json.loads(path.read_text())
    assert validate(document, "ppgbench-results.schema.json") == [] and lines == []
    assert document["model"] == "small_cnn" and path.stat().st_size < 3_000_000  # about 1.5 MB
    named = {r["job_id"] for r in document["records"] if any(x.get("predictions") for x in r["results"])}
    assert set(document["predictions"]) == named and document["predictions_left_out"] == []


@pytest.mark.skipif(not (QUICKSTART / "run.json").is_file(), reason="no quickstart run in results/quickstart")
def test_the_quickstart_reports_references_parse_and_hold_what_it_used(tmp_path):
    from ppgbench_pl.report.build import write_references
    from ppgbench_pl.report.load import load_runs

    refs = write_references(tmp_path, load_runs([QUICKSTART]).records)  # what build_report writes
    assert refs.datasets == ["synthetic"] and set(refs.models) == {"small_cnn", "prv_published"}
    # no card paper for the synthetic set, the small CNN or ppgbench's PRV: the benchmark alone
    assert set(pybtex_entries((tmp_path / "references.bib").read_text())) == {"ppgbench"} == set(refs.keys)


def test_a_record_the_summary_cannot_use_is_refused_when_the_file_is_opened(runs, tmp_path):
    """A hand-edited (or older) file whose ok record lacks a field: one line naming the file and the field,
    when the file is opened (the schema), never a bare MalformedRecord later."""
    _, files = runs
    document = json.loads(files[0].read_text())
    i, record = next((i, r) for i, r in enumerate(document["records"]) if r.get("status") == "ok")
    del record["seed"]
    damaged = tmp_path / "damaged.ppgbench.json"
    damaged.write_text(json.dumps(document))
    with pytest.raises(DataError, match=rf"^\S*damaged.ppgbench.json: field \$.records\[{i}\]: 'seed' is a "
                                        "required property$"):
        pb.load_run(damaged)
