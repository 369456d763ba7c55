"""Two small submissions with known outcomes, exported with ``ppgbench export``'s own code (no torch).

The run folders are written through the benchmark's record writer (``tests/report/fabricate.py``), with the
pretraining fields the engine computes (:func:`ppgbench_pl.cards.overlap.overlap`, as ``record_fields``
does), then exported by :func:`ppgbench_pl.results.export.export_run`:

* ``mynet``, a user's model declaring ``pretraining_data: [bidmc]``: linear on synthetic-hr, synthetic-age
  (secondary tier) and bidmc-resp (``direct`` overlap, ‡), and mlp on synthetic-hr;
* ``papagei_s``, the catalog model (its card: MESA, MIMIC-III, VitalDB), linear on synthetic-hr (the best),
  synthetic-stiffness (near chance, †) and bidmc-resp (``source`` overlap through MIMIC-III, §).

(Real tiny runs, as ``tests/cards/test_export.py`` makes, take about 20 s each; the synthetic dataset can
be nobody's pretraining data, so its cells are never flagged.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppgbench_pl.cards.declaration import declaration_json, parse_declaration
from ppgbench_pl.cards.overlap import card_declaration, dataset_of, overlap
from ppgbench_pl.results.export import export_run
from ppgbench_pl.results.records import write_job
from tests.report.fabricate import record, spread, write_run_json

SEEDS = (1, 2, 3)
CHANCE = {"synthetic-hr": 12.0, "synthetic-stiffness": 0.5, "synthetic-age": 15.0, "bidmc-resp": 4.0}
#: model -> (regime, task) -> (mean, CI half-width) of its seed values.
SCORES = {
    "mynet": {("linear", "synthetic-hr"): (9.0, 0.5), ("linear", "synthetic-age"): (10.0, 0.5),
              ("linear", "bidmc-resp"): (2.5, 0.2), ("mlp", "synthetic-hr"): (8.5, 0.5)},
    "papagei_s": {("linear", "synthetic-hr"): (6.0, 0.4), ("linear", "synthetic-stiffness"): (0.505, 0.02),
                  ("linear", "bidmc-resp"): (3.0, 0.2)},
}
PARAMETERS = {"mynet": {"total": 1234, "trainable": 1234}}


def _declaration(model: str) -> tuple[Any, bool]:
    return (parse_declaration(["bidmc"], model), True) if model == "mynet" else card_declaration(model)


def _overlap_fields(model: str, task: str) -> dict[str, Any]:
    data, complete = _declaration(model)
    flag = overlap(data, complete, dataset_of(task))
    return {"pretraining_data": declaration_json(data), "pretraining_complete": complete,
            "pretraining_overlap": flag.value, "pretraining_overlap_via": list(flag.via),
            "pretraining_overlap_status": flag.status}


def identity(model: str) -> dict[str, Any]:
    """The ``run.json`` identity a real run writes (its protocol block and digests): settings of every dataset
    and regime the model ran, the numeric trainer settings, made-up data and weight digests."""
    datasets = sorted({dataset_of(task) for _, task in SCORES[model]})
    return {"trainer": {"precision": "32-true", "deterministic": None, "benchmark": None, "sync_batchnorm": False,
                        "device": "cpu"},
            "datasets": {d: {"n_folds": 5, "n_inner_folds": 4, "batch_size": 256, "data": {"64": f"{d}-digest"}}
                         for d in datasets},
            "encoders": {model: {"weights": f"{model}-weights"}},
            "regimes": {r: {"binary_metric": "'auroc'"} for r in sorted({r for r, _ in SCORES[model]})}}


def write_submission(run_dir: Path, model: str) -> None:
    """One model's run folder: its jobs (one fold per seed) with the constant baseline in each record."""
    planned = []
    for (regime, task), (mean, half) in SCORES[model].items():
        chance = CHANCE[task]
        base = spread(chance, 0.01 * chance, len(SEEDS))  # the same baseline in both runs: no conflict
        for seed, value, b in zip(SEEDS, spread(mean, half, len(SEEDS)), base, strict=True):
            rec = record(model, task, regime, seed, 0, float(value), float(b), {"alpha": 1.0})
            rec.update(_overlap_fields(model, task), fs=64.0, budget="published")
            write_job(run_dir, rec["job_id"], rec)
            planned.append(rec["job_id"])
    write_run_json(run_dir, planned, {m: c for m, c in PARAMETERS.items() if m == model})
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**meta, "identity": identity(model)}))


def make_submissions(root: Path) -> tuple[list[Path], list[Path]]:
    """The two run folders and their exported files (``mynet.ppgbench.json``, ``papagei_s.ppgbench.json``)."""
    folders, files = [], []
    for model in SCORES:
        folder = root / f"run_{model}"
        write_submission(folder, model)
        folders.append(folder)
        left_out: list[str] = []  # the fabricated records name prediction files that were not written
        files.append(export_run(folder, root / f"{model}.ppgbench.json", warn=left_out.append))
    return folders, files
