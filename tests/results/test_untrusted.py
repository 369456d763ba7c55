"""The reader of untrusted results files, check by check (``results/untrusted.py``,
``plausible.py``), and ``ppgbench export`` refusing to write what the reader would refuse.

Each case changes one thing of a small valid export (:func:`tests.bad_input.hostile_exports.valid_export`) and
expects the one line that names the file and the field; the corpus of the issue is
``tests/bad_input/test_untrusted_results.py``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ppgbench_pl.errors import DataError
from ppgbench_pl.results.export import export_run
from ppgbench_pl.results.records import write_job
from ppgbench_pl.results.untrusted import loads_bounded, read_results_file
from tests.bad_input.hostile_exports import valid_export


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> Path:
    return valid_export(tmp_path_factory.mktemp("valid"))


def _changed(valid: Path, tmp_path: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    document = json.loads(valid.read_text())
    change(document)
    path = tmp_path / "changed.ppgbench.json"
    path.write_text(json.dumps(document))
    return path


def _ok(document: dict[str, Any], task: str = "synthetic-hr") -> dict[str, Any]:
    return next(r for r in document["records"] if r["task"] == task)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = document
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return change


def test_the_valid_file_reads(valid):
    assert read_results_file(valid)["model"] == "papagei_s"


@pytest.mark.parametrize("text, message", [
    (b'{"a": 1, "b": {"c": 1, "c": 2}}', "duplicate key 'c' in one JSON object"),
    (b'[NaN]', "NaN is not JSON"),
    (b'[-Infinity]', "-Infinity is not JSON"),
    (b'[1e999]', "number 1e999 is not finite"),
    (b'[' + b'9' * 5000 + b']', "integer of 5000 digits (at most 20)"),
    (b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', None),  # brackets in a string do not nest
    (b'[' * 33 + b']' * 33, "nests 33 levels deep, more than the 32"),
    (b'\xff\xfe', "is not valid JSON (not UTF-8 text)"),
])
def test_the_bounded_parser(text, message):
    if message is None:
        assert loads_bounded(text) == {"a": "[" * 40}
        return
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        loads_bounded(text)


@pytest.mark.parametrize("change, message", [
    (_set("cells.0.n_seeds", 7), r"field cells\[0\]\.n_seeds: 7 does not count its 3 seed values"),
    (_set("cells.0.n_folds", 1), r"field cells\[0\]\.n_folds: 1 does not count its 3 fold values"),
    (_set("cells.0.ci95", -1.0), r"field cells\[0\]\.ci95: -1\.0 is not a confidence half-width"),
    (lambda d: d["cells"][0].update(mean=-2.0) if d["cells"][0]["metric"] == "mae" else None,
     r"field cells\[0\]\.mean: mae -2\.0 is outside its range"),
    (lambda d: _ok(d).update(seed=2**40), r"field \$\.records\[\d+\]\.seed: 1099511627776 is greater than the maximum"),
    (lambda d: _ok(d).update(fold=7), r"field records\[\d+\]\.job_id: \S+ is not the id of its model, task, regime"),
    (lambda d: _ok(d).update(model="constant"), r"field records\[\d+\]\.model: 'constant' is neither the file's model"),
    (lambda d: d["records"].append(dict(d["records"][0])), r"field records\[9\]\.job_id: job \S+ appears twice"),
    (lambda d: _ok(d)["results"][0]["metrics"].update(r2=1.5), r"metrics\.r2: r2 1\.5 is outside its range \[-inf, 1\]"),
    (lambda d: _ok(d, "synthetic-stiffness")["baseline"].update(auroc=-0.1), r"baseline\.auroc: auroc -0\.1 is outside"),
    (lambda d: _ok(d)["results"][0]["metrics"].update(mae_per_target=[1.0, -1.0]),
     r"metrics\.mae_per_target: mae -1\.0 is outside its range"),
    (_set("protocol.budget", "smoke"), r"field protocol\.budget: 'smoke', but the records were run under 'published'"),
    (lambda d: d["protocol"].pop("regimes.linear.binary_metric"), r"field protocol: no setting of regime 'linear'"),
    (lambda d: d["protocol"].pop("datasets.bidmc.n_inner_folds"),
     r"field records\[\d+\]\.task: 'bidmc-resp' is of dataset 'bidmc', which the protocol block does not describe"),
    (lambda d: d["digests"]["data"].pop("bidmc"), r"'bidmc-resp' is of dataset 'bidmc', which has no data digest"),
    (lambda d: d["protocol"].update({"datasets.synthetic.n_folds": "1"}), r"field protocol\.datasets\.synthetic\.n_folds: '1' is not a fold"),
    (lambda d: d["predictions"].update({"someone__else": {}}), r"field predictions\.someone__else: no record of the file has this job id$"),
    (lambda d: d["predictions"][_ok(d)["job_id"]].update({"../../x.npz": {}}),
     r"field predictions\.\S+\.\.\./\.\./x\.npz: no record of the file names this prediction file"),
    (lambda d: d["predictions"][_ok(d)["job_id"]]["predictions_repeat0.npz"]["y_true"].update(shape=[9]),
     r"predictions_repeat0\.npz: array 'subjects' has 8 rows but 'y_true' has 9 \(one row per test window\)$"),
    (lambda d: d["predictions"][_ok(d)["job_id"]]["predictions_repeat0.npz"]["subjects"].update(runs=[["S01", 8]],
                                                                                              dtype="<U2"),
     r"\.subjects: 'runs' hold text longer than its dtype <U2"),
    (lambda d: _ok(d)["results"][0].update(repeat=4), r"\.results\[0\]\.repeat: 4 \(the repeats are numbered"),
    (lambda d: _ok(d).update(windows_without_features={"n": 9, "of": 8}),
     r"field records\[\d+\]\.windows_without_features: 9 of 8 windows$"),
    (_set("format_version", 3), r"format_version 3 is not one this ppgbench reads \(1 to 2\); upgrade ppgbench$"),
    (_set("created", "yesterday"), r"field \$\.created: 'yesterday' does not match"),
])
def test_a_file_a_run_could_not_have_written_is_refused_in_one_line(valid, tmp_path, change, message):
    path = _changed(valid, tmp_path, change)
    with pytest.raises(DataError) as info:
        read_results_file(path)
    line = str(info.value)
    assert line.startswith(f"{path}: ") and "\n" not in line
    assert re.search(message, line), line


def test_a_file_larger_than_the_bound_is_refused_before_it_is_read(valid, monkeypatch):
    monkeypatch.setenv("PPGBENCH_MAX_RESULTS_MB", "0.01")
    with pytest.raises(DataError, match=r"is 0\.0 MiB, more than the 0 MiB a results file may be"):
        read_results_file(valid)
    monkeypatch.setenv("PPGBENCH_MAX_RESULTS_MB", "lots")
    with pytest.raises(DataError, match=r"PPGBENCH_MAX_RESULTS_MB='lots': give a size in MB"):
        read_results_file(valid)


def test_export_refuses_to_write_a_file_the_readers_would_refuse(valid, tmp_path):
    """A run folder whose record holds an impossible value: nothing written, one line naming the field."""
    run = valid.parent / "run_papagei_s_8"
    record_file = sorted(run.glob("jobs/*synthetic-hr*/results.json"))[0]
    record = json.loads(record_file.read_text())
    record["results"][0]["metrics"]["mae"] = -3.0
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    write_job(copy, record["job_id"], record)
    target = tmp_path / "out.ppgbench.json"
    with pytest.raises(DataError, match=r"the export would not be a valid results file \(field records\[\d+\]\.results"
                                        r"\[0\]\.metrics\.mae: mae -3\.0 is outside its range \[0, inf\]\); nothing "
                                        r"written$"):
        export_run(copy, target, warn=lambda line: None)  # write_job left the job without its npz
    assert not target.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["run"]
