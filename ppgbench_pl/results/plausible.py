"""What an exported results file may claim beyond its JSON Schema: each check a one-line reason or None."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

#: Metric -> (lowest, highest) value it can take.
METRIC_RANGES = {
    "mae": (0.0, math.inf), "mse": (0.0, math.inf), "rmse": (0.0, math.inf), "r2": (-math.inf, 1.0),
    **dict.fromkeys(("accuracy", "balanced_accuracy", "f1_macro", "auroc", "auprc", "auroc_ovr",
                     "argmax_accuracy", "argmax_balanced_accuracy", "argmax_f1_macro", "argmax_true_tie_rate",
                     "argmax_pred_tie_rate"), (0.0, 1.0)),
}
#: No metric value of any task comes near it; the mean of a million such values stays finite.
MAX_MAGNITUDE = 1e100
#: Trainer settings that change a number (the device kind is not compared).
TRAINER_SETTINGS = ("precision", "deterministic", "benchmark", "sync_batchnorm")
DATASET_KEYS = ("n_folds", "n_inner_folds")
PROTOCOL_REGIMES = ("linear", "rf", "mlp", "finetune")
#: Unpacked arrays may take at most this many bytes, plus this many per byte of the file.
DECLARED_FLOOR = 64 << 20
DECLARED_PER_FILE_BYTE = 32
PREDICTION_FILE = re.compile(r"^predictions_repeat[0-9]{1,4}(_search[0-9]{1,4})?\.npz$")
#: Control names of older runs (the NeuroKit2 PRV was called ``prv``).
LEGACY_CONTROLS = ("prv",)


def control_names() -> tuple[str, ...]:
    """The controls a model is compared with (catalog role ``control``, plus older runs' names)."""
    from ppgbench_pl.encoders.catalog import CATALOG

    return (*(n for n, e in CATALOG.items() if e.role == "control"), *LEGACY_CONTROLS)


def metric_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be metric ``name`` (None: it can; text and null, a metric's error, pass)."""
    if isinstance(value, list):
        base = name.removesuffix("_per_target")
        return next((p for v in value if (p := metric_problem(base, v))), None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high = METRIC_RANGES.get(name, (-math.inf, math.inf))
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        return f"{name} {value!r} is not a plausible metric value (beyond +-{MAX_MAGNITUDE:g})"
    if not low <= value <= high:
        return f"{name} {value!r} is outside its range [{low:g}, {high:g}]"
    return None


def _metrics(where: str, metrics: Any) -> Iterator[str]:
    for name, value in (metrics or {}).items() if isinstance(metrics, dict) else ():
        if problem := metric_problem(str(name), value):
            yield f"{where}.{name}: {problem}"


def record_problems(records: list[dict[str, Any]], model: str) -> Iterator[str]:
    """Metric ranges, ids, models and the summary's own checks of each record (``records[i]...: why``)."""
    from ppgbench_pl.results.fold_entry import MalformedRecord, fold_entry
    from ppgbench_pl.results.records import job_id

    seen, controls = set(), control_names()
    for i, rec in enumerate(records):
        at = f"records[{i}]"
        if rec["job_id"] in seen:
            yield f"{at}.job_id: job {rec['job_id']} appears twice"
        seen.add(rec["job_id"])
        if rec.get("status") != "ok":
            continue
        if rec["model"] not in (model, *controls):
            yield f"{at}.model: {rec['model']!r} is neither the file's model {model!r} nor a control"
        expected = job_id(rec["model"], rec["task"], rec["regime"], rec["seed"], rec["fold"])
        if rec["job_id"] != expected:
            yield f"{at}.job_id: {rec['job_id']} is not the id of its model, task, regime, seed and fold ({expected})"
        yield from _metrics(f"{at}.baseline", rec.get("baseline"))
        for key in ("results", "search_seed_results"):
            for j, result in enumerate(rec.get(key) or []):
                yield from _metrics(f"{at}.{key}[{j}].metrics", result.get("metrics"))
                if key == "results" and result.get("repeat", j) != j:
                    yield f"{at}.results[{j}].repeat: {result['repeat']} (the repeats are numbered 0, 1, ... in order)"
        empty = rec.get("windows_without_features") or {"n": 0, "of": 0}
        if not 0 <= empty.get("n", 0) <= empty.get("of", 0):
            yield f"{at}.windows_without_features: {empty.get('n')} of {empty.get('of')} windows"
        try:
            fold_entry(rec)
        except MalformedRecord as exc:
            yield f"{at}: {exc}"


def cell_problems(cells: list[dict[str, Any]]) -> Iterator[str]:
    """Each summary cell's values in its metric's range, and its counts equal to the values it lists."""
    for i, cell in enumerate(cells):
        at, metric = f"cells[{i}]", str(cell["metric"])
        values = [("mean", cell["mean"]), ("baseline_mean", cell.get("baseline_mean")),
                  *((f"seed_values[{k}].value", v["value"]) for k, v in enumerate(cell["seed_values"])),
                  *((f"fold_values[{k}].value", v["value"]) for k, v in enumerate(cell["fold_values"]))]
        for field, value in values:
            if problem := metric_problem(metric, value):
                yield f"{at}.{field}: {problem}"
        if isinstance(cell.get("ci95"), int | float) and not 0 <= cell["ci95"] <= MAX_MAGNITUDE:
            yield f"{at}.ci95: {cell['ci95']!r} is not a confidence half-width (>= 0)"
        seeds = [v["seed"] for v in cell["seed_values"]]
        if cell["n_seeds"] != len(seeds) or len(set(seeds)) != len(seeds):
            yield f"{at}.n_seeds: {cell['n_seeds']} does not count its {len(seeds)} seed values (distinct seeds)"
        if cell["n_folds"] != len(cell["fold_values"]):
            yield f"{at}.n_folds: {cell['n_folds']} does not count its {len(cell['fold_values'])} fold values"


def _setting(protocol: dict[str, str], key: str) -> int | None:
    try:
        return int(protocol[key])
    except (KeyError, ValueError):
        return None


def protocol_problems(document: dict[str, Any]) -> Iterator[str]:
    """A complete protocol block, and every record's dataset, fold and budget consistent with it."""
    from ppgbench_pl.data.registry import TASKS

    protocol, records = document["protocol"], document["records"]
    ok = [r for r in records if r.get("status") == "ok"]
    for key in (*(f"trainer.{k}" for k in TRAINER_SETTINGS), "budget"):
        if key not in protocol:
            yield f"protocol: missing '{key}' (a run writes it; an empty or partial block cannot be compared)"
    budgets = ";".join(sorted({str(r.get("budget") or "published") for r in ok}))
    if "budget" in protocol and protocol["budget"] != budgets:
        yield f"protocol.budget: {protocol['budget']!r}, but the records were run under {budgets!r}"
    for regime in sorted({str(r["regime"]) for r in ok} & set(PROTOCOL_REGIMES)):
        if not any(k.startswith(f"regimes.{regime}.") for k in protocol):
            yield f"protocol: no setting of regime '{regime}' (regimes.{regime}.*), though its records are here"
    data = document["digests"]["data"]
    for i, rec in enumerate(records):
        if rec.get("status") != "ok":
            continue
        task = str(rec["task"])
        dataset = TASKS[task].dataset if task in TASKS else task.split("-", 1)[0]
        missing = [f"datasets.{dataset}.{k}" for k in DATASET_KEYS if f"datasets.{dataset}.{k}" not in protocol]
        if missing:
            yield (f"records[{i}].task: {rec['task']!r} is of dataset '{dataset}', which the protocol block "
                   f"does not describe ({missing[0]} missing)")
        elif not data.get(dataset):
            yield (f"records[{i}].task: {rec['task']!r} is of dataset '{dataset}', which has no data digest "
                   "(digests.data)")
        elif (n := _setting(protocol, f"datasets.{dataset}.n_folds")) is None or not 2 <= n <= 1000:
            key = f"datasets.{dataset}.n_folds"
            yield f"protocol.{key}: {protocol[key]!r} is not a fold count"
        elif rec["fold"] >= n:
            yield f"records[{i}].fold: fold {rec['fold']} of a {n}-fold protocol"


def prediction_problems(document: dict[str, Any], file_bytes: int) -> Iterator[str]:
    """Packed arrays: of a record, named by it, siblings that agree, a total size bounded by the file's."""
    from ppgbench_pl.results.packed_arrays import check_siblings, declared

    named = {str(r["job_id"]): {str(x.get("predictions")) for k in ("results", "search_seed_results")
                                for x in r.get(k) or []} for r in document["records"]}
    total, cap = 0, DECLARED_FLOOR + DECLARED_PER_FILE_BYTE * file_bytes
    for jid, files in (document.get("predictions") or {}).items():
        if jid not in named:
            yield f"predictions.{jid}: no record of the file has this job id"
            continue
        for name, arrays in files.items():
            at = f"predictions.{jid}.{name}"
            if name not in named[jid] or not PREDICTION_FILE.match(name):
                yield f"{at}: no record of the file names this prediction file"
                continue
            shapes = {}
            for array, packed in arrays.items():
                try:
                    dtype, shape = declared(packed)
                except ValueError as exc:
                    yield f"{at}.{array}: {exc}"
                    return
                shapes[array], total = shape, total + math.prod(shape) * dtype.itemsize
            try:
                check_siblings(shapes)
            except ValueError as exc:
                yield f"{at}: {exc}"
            if total > cap:
                yield (f"{at}: the arrays declared so far would unpack to {total / 2**20:.0f} MiB, more than "
                       f"{cap / 2**20:.0f} MiB for a file of {file_bytes / 2**20:.1f} MiB")
                return


def first_problem(document: dict[str, Any], file_bytes: int) -> str | None:
    """The first reason a schema-valid document cannot be a run's export (``<field>: <why>``), or None."""
    checks = (record_problems(document["records"], str(document["model"])),
              cell_problems(document["cells"]), protocol_problems(document),
              prediction_problems(document, file_bytes))
    return next((problem for check in checks for problem in check), None)
