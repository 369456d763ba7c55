"""Hostile exported results files (issue 30, points 3-4), made by a seeded generator.

:func:`valid_export` writes a small real export: the fabricated ``papagei_s`` submission of
``tests/leaderboard/submissions.py`` (linear on synthetic-hr, synthetic-stiffness and bidmc-resp, 3 seeds)
with a prediction file per job (arrays drawn from ``numpy.random.default_rng(seed)``), exported by
``ppgbench export``'s own code. Each entry of :data:`CASES` turns its text into one attack of the issue and
names the field its refusal must name; :func:`write_case` writes it.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.data.registry import TASKS
from ppgbench_pl.results.export import export_run
from ppgbench_pl.results.records import job_id
from tests.leaderboard.submissions import write_submission

WINDOWS = 8  # test windows per job (the "8 labels")


def valid_export(root: Path, seed: int = 0, windows: int = WINDOWS) -> Path:
    """A valid exported file whose jobs all carry their predictions (``windows`` test windows each: 8 make
    a file of about 25 kB, 3,000 about 0.5 MB, 26,000 about 3.9 MB)."""
    rng = np.random.default_rng(seed)
    run = root / f"run_papagei_s_{windows}"
    write_submission(run, "papagei_s")
    for record_file in sorted(run.glob("jobs/*/results.json")):
        record = json.loads(record_file.read_text())
        halves = [windows // 2, windows - windows // 2]
        subjects = np.repeat(np.array(["S01", "S02"]), halves)
        if TASKS[record["task"]].kind == "classification":  # one class per subject (subject-level tasks)
            y_prob = rng.dirichlet([1, 1], size=windows)
            arrays = {"y_true": np.repeat([0, 1], halves), "subjects": subjects, "y_prob": y_prob,
                      "y_pred": y_prob.argmax(1), "classes": np.array([0, 1])}
        else:
            arrays = {"y_true": rng.normal(60, 10, windows).astype(np.float32), "subjects": subjects,
                      "y_pred": rng.normal(60, 10, windows)}
        np.savez_compressed(record_file.parent / "predictions_repeat0.npz", **arrays)
    return export_run(run, root / f"valid_{windows}.ppgbench.json")


CHUNK = 16 << 20
STEADY_BLOCKS = 170


def _inflated(raw_deflate: bytes) -> int:
    """How many bytes a (partial) raw deflate stream inflates to so far."""
    inflater, n, data = zlib.decompressobj(-15), 0, raw_deflate
    while data:
        n += len(inflater.decompress(data, 1 << 26))
        data = inflater.unconsumed_tail
    return n


def zlib_bomb() -> tuple[bytes, int]:
    """zlib data of about 2.9 GB of zeros in about 2.8 MB, built without compressing them all; and that size.

    Deflating equal zero chunks reaches a steady state in which each chunk compresses to the same block
    and leaves the same pending state, so the steady block is repeated (each inflating to as many bytes as
    one repetition adds, measured on two). The stream ends as a real 3-chunk stream ends, with the
    Adler-32 of the zeros (a = 1, b = their count mod 65521), so it is a valid zlib stream.
    """
    compressor = zlib.compressobj(9)
    zeros = bytes(CHUNK)
    head, steady, again = (compressor.compress(zeros) for _ in range(3))
    assert steady == again, "no steady state"
    final = compressor.flush()[:-4]
    per_block = _inflated(head[2:] + steady * 3) - _inflated(head[2:] + steady * 2)
    total = 3 * CHUNK + (STEADY_BLOCKS - 2) * per_block
    adler = ((total % 65521) << 16) | 1
    return head + steady * STEADY_BLOCKS + final + adler.to_bytes(4, "big"), total


def _first(document: dict[str, Any], task: str) -> tuple[int, dict[str, Any]]:
    return next((i, r) for i, r in enumerate(document["records"]) if r["task"] == task)


def _arrays(document: dict[str, Any], task: str) -> dict[str, Any]:
    jid = _first(document, task)[1]["job_id"]
    return document["predictions"][jid]["predictions_repeat0.npz"]


def _text_runs(document: dict[str, Any]) -> None:
    _arrays(document, "synthetic-hr")["subjects"] = {"dtype": "<U3", "shape": [10**9], "runs": [["S01", 10**9]]}


def _bomb_declared(document: dict[str, Any]) -> None:
    bomb, size = zlib_bomb()
    _arrays(document, "synthetic-hr")["y_pred"] = {
        "dtype": "|u1", "shape": [size], "zlib_base64": base64.b64encode(bomb).decode()}


def bomb_small(document: dict[str, Any]) -> None:
    """The bomb as the data of the 8 floats the file declares (refused once 65 bytes are inflated)."""
    _arrays(document, "synthetic-hr")["y_pred"]["zlib_base64"] = base64.b64encode(zlib_bomb()[0]).decode()


def _subjects(document: dict[str, Any]) -> None:
    _arrays(document, "synthetic-hr")["subjects"] = {"dtype": "<U3", "shape": [50_000_000],
                                                     "runs": [["S01", 25_000_000], ["S02", 25_000_000]]}


def _metric(task: str, name: str, value: float) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        _first(document, task)[1]["results"][0]["metrics"][name] = value
    return change


def _both_extremes(document: dict[str, Any]) -> None:
    _metric("synthetic-hr", "mae", 1e308)(document)
    next(r for r in document["records"][::-1] if r["task"] == "synthetic-hr")["results"][0]["metrics"]["mae"] = -1e308


def _empty_protocol(document: dict[str, Any]) -> None:
    document["protocol"] = {}


def _relabelled(document: dict[str, Any]) -> None:
    """Every synthetic-hr record (and cell) relabelled dalia-hr, job ids recomputed to match."""
    for record in document["records"]:
        if record["task"] == "synthetic-hr":
            old = record["job_id"]
            record["task"] = "dalia-hr"
            record["job_id"] = job_id(record["model"], "dalia-hr", record["regime"], record["seed"], record["fold"])
            document["predictions"][record["job_id"]] = document["predictions"].pop(old)
    for cell in document["cells"]:
        cell["task"] = cell["task"].replace("synthetic-hr", "dalia-hr")


#: name -> (change of the parsed document, or of the file's text; a regex of the refusal after the file name).
CASES: dict[str, tuple[Callable[[Any], Any], str]] = {
    "text_array_of_1e9_values": (
        _text_runs, r"field predictions\.\w+__synthetic-hr__\S+\.npz\.subjects: shape \[1000000000\] x <U3 would "
                    r"take 11444 MiB, more than the 512 MiB an exported array may$"),
    "zlib_bomb_declared_at_its_size": (
        _bomb_declared, r"field predictions\.\S+\.npz\.y_pred: shape \[2\d{9}\] x \|u1 would take 27\d\d MiB"),
    "50_million_subjects_beside_8_labels": (
        _subjects, r"field predictions\.\S+\.npz\.subjects: shape \[50000000\] x <U3 would take 572 MiB"),
    "200000_nested_brackets": (lambda text: "[" * 200_000 + "]" * 200_000,
                               r"nests 200000 levels deep, more than the 32 a results file may$"),
    "mae_of_minus_3": (_metric("synthetic-hr", "mae", -3.0),
                       r"field records\[\d+\]\.results\[0\]\.metrics\.mae: mae -3\.0 is outside its range \[0, inf\]$"),
    "balanced_accuracy_of_1.5": (_metric("synthetic-stiffness", "balanced_accuracy", 1.5),
                                 r"field records\[\d+\]\.results\[0\]\.metrics\.balanced_accuracy: balanced_accuracy "
                                 r"1\.5 is outside its range \[0, 1\]$"),
    "plus_and_minus_1e308": (_both_extremes, r"field records\[\d+\]\.results\[0\]\.metrics\.mae: mae 1e\+308 is not "
                                             r"a plausible metric value"),
    "empty_protocol": (_empty_protocol, r"field protocol: missing 'trainer\.precision'"),
    "relabelled_dalia_hr": (_relabelled, r"field records\[\d+\]\.task: 'dalia-hr' is of dataset 'dalia', which the "
                                         r"protocol block does not describe \(datasets\.dalia\.n_folds missing\)$"),
    "duplicate_key": (lambda text: text.replace('"mae": ', '"mae": 1.0, "mae": ', 1),
                      r"duplicate key 'mae' in one JSON object"),
}
TEXT_CASES = ("200000_nested_brackets", "duplicate_key")


def write_case(valid: Path, name: str, out: Path) -> Path:
    """The valid file with case ``name`` applied, written to ``out``."""
    change = CASES[name][0]
    if name in TEXT_CASES:
        out.write_text(change(valid.read_text()))
    else:
        document = json.loads(valid.read_text())
        change(document)
        out.write_text(json.dumps(document))
    return out
