"""One model's results as a single versioned file others can read: ``ppgbench export RUN --output X.ppgbench.json``.

Summary ``cells``, job ``records``, packed ``predictions``, shared ``protocol`` settings, identity, versions,
digests and ``model_card``; schema ``ppgbench_pl/schema/ppgbench-results.schema.json`` (docs/schema/README.md).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import DataError
from ppgbench_pl.results.fold_entry import code_label, fold_entry
from ppgbench_pl.results.plausible import TRAINER_SETTINGS, control_names
from ppgbench_pl.results.records import model_id, scan_records
from ppgbench_pl.results.untrusted import FORMAT, FORMAT_VERSION

SUFFIX = ".ppgbench.json"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def protocol_settings(identity: dict[str, Any], records: Iterable[dict[str, Any]] = ()) -> dict[str, str]:
    """The settings two results must share, flattened (``regimes.mlp.search``, ``datasets.bidmc.n_folds``)."""
    flat: dict[str, str] = {}
    for name, settings in sorted((identity.get("regimes") or {}).items()):
        flat.update({f"regimes.{name}.{k}": _text(v) for k, v in sorted(settings.items())})
    for key, settings in sorted((identity.get("datasets") or {}).items()):
        flat.update({f"datasets.{key}.{k}": _text(v) for k, v in sorted(settings.items()) if k != "data"})
    trainer = identity.get("trainer") or {}
    flat.update({f"trainer.{k}": _text(trainer.get(k)) for k in TRAINER_SETTINGS if k in trainer})
    budgets = sorted({str(r.get("budget") or "published") for r in records})
    if budgets:
        flat["budget"] = ";".join(budgets)
    return flat


def _read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Path]]:
    """``run.json``, the ``ok`` records of a run folder and each one's job folder (one-line errors)."""
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: no such run folder")
    meta_path = run_dir / "run.json"
    try:
        meta = json.loads(meta_path.read_bytes())
    except FileNotFoundError:
        raise DataError(f"{meta_path}: missing; export needs a run made by ppgbench fit/benchmark") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DataError(f"{meta_path}: not valid JSON") from None
    if not isinstance(meta, dict):
        raise DataError(f"{meta_path}: not a run description (a JSON object was expected)")
    scan = scan_records(run_dir, transform=_usable)
    if scan.problems:  # a file others read must not silently leave out a fold
        more = f" (and {len(scan.problems) - 1} more damaged records)" if len(scan.problems) > 1 else ""
        raise DataError(f"{scan.problems[0]}{more}; export would leave its fold out: resume the run (it "
                        "reruns such jobs), then export")
    done = [(r, f) for r, f in zip(scan.records, scan.folders, strict=True) if r.get("status") == "ok"]
    if not done:
        raise DataError(f"{run_dir}: no completed job records to export")
    return meta, [r for r, _ in done], {str(r.get("job_id")): f for r, f in done}


def _usable(record: dict[str, Any]) -> dict[str, Any]:  # a MalformedRecord becomes a problem of its file
    fold_entry(record)
    return record


def _choose_model(run_dir: Path, records: list[dict[str, Any]], model: str | None) -> str:
    controls = control_names()
    models = sorted({str(r["model"]) for r in records if str(r["model"]) not in controls})
    if model is not None:
        if model not in {str(r["model"]) for r in records}:
            raise DataError(f"{run_dir}: no completed jobs of model '{model}' (it has {', '.join(models)})")
        return model
    if len(models) != 1:
        raise DataError(f"{run_dir}: holds {len(models)} models under test ({', '.join(models) or 'none'}); "
                        "choose one with --model")
    return models[0]


def _cells(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every summary row of these records with its per-seed and per-fold values (JSON-safe)."""
    from ppgbench_pl.atomic_io import json_safe
    from ppgbench_pl.results.summary import SummaryBook

    book = SummaryBook.from_records(records)
    folds = book.fold_table()
    by_row: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in folds.itertuples():
        by_row.setdefault((row.model, row.task, row.regime), []).append(
            {"seed": int(row.seed), "fold": int(row.fold), "value": float(row.value)})
    cells = []
    for row in book.summary().to_dict(orient="records"):
        fold_values = by_row.get((row["model"], row["task"], row["regime"]), [])
        seeds: dict[int, list[float]] = {}
        for f in fold_values:
            seeds.setdefault(f["seed"], []).append(f["value"])
        cells.append({**json_safe(row), "fold_values": fold_values,
                      "seed_values": [{"seed": s, "value": sum(v) / len(v)} for s, v in sorted(seeds.items())]})
    return cells


def _predictions(records: list[dict[str, Any]], folders: dict[str, Path]) -> tuple[dict[str, Any], list[str]]:
    """Job id -> prediction file name -> packed arrays, and ``<path>: <why>`` of each file left out."""
    import zipfile
    import zlib

    import numpy as np

    from ppgbench_pl.results.packed_arrays import pack_all

    out: dict[str, Any] = {}
    left_out: list[str] = []
    for record in records:
        jid = str(record.get("job_id"))
        for result in record.get("results") or []:
            name = result.get("predictions")
            if not name:
                continue  # a record that stored no arrays
            path = folders[jid] / str(name)
            where = f"{folders[jid].parent.name}/{folders[jid].name}/{name}"  # inside the run: no local path
            try:
                with np.load(path, allow_pickle=False) as arrays:
                    out.setdefault(jid, {})[str(name)] = pack_all({k: arrays[k] for k in arrays.files})
            except FileNotFoundError:
                left_out.append(f"{where}: missing")
            except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                left_out.append(f"{where}: unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
    return out, left_out


def model_card(model: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's card row (catalog models), else what its records declare (a user's model)."""
    from ppgbench_pl.cards.citations import card_name
    from ppgbench_pl.cards.rows import model_card_rows

    rows = model_card_rows()
    name = card_name(model)
    if name in rows and name != "custom":
        return {"name": name, **rows[name]}
    declared = next((r["pretraining_data"] for r in records if "pretraining_data" in r), "unknown")
    return {"name": model, "pretraining_data": declared, "paper": None}


def build_export(run_dir: str | Path, model: str | None = None) -> dict[str, Any]:
    """The exported document of one model of a run folder (``DataError``: one line)."""
    from ppgbench_pl.results.provenance import input_label

    run_dir = Path(run_dir)
    meta, records, folders = _read_run(run_dir)
    chosen = _choose_model(run_dir, records, model)
    keep = {chosen, *control_names()}
    mine = [r for r in records if str(r["model"]) in keep]
    identity = meta.get("identity") or {}
    ids = {model_id(m) for m in keep}
    predictions, left_out = _predictions(mine, folders)
    source = input_label(run_dir, shown=64)  # the folder's name and digest: no local path in a shared file
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "model": chosen,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run": {"run_uid": meta.get("run_uid"), "source": source, "seeds": meta.get("seeds"),
                "folds": meta.get("folds"), "device": meta.get("device"),
                "identity_sha256": hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest(),
                "planned_jobs": [j for j in meta.get("planned_jobs") or [] if str(j).split("__")[0] in ids],
                "parameters": {m: c for m, c in (meta.get("parameters") or {}).items() if m in keep}},
        "protocol": protocol_settings(identity, mine),
        "versions": {"ppgbench": meta.get("ppgbench"), "python": meta.get("python"),
                     "packages": meta.get("versions") or {},
                     "code_versions": sorted({code_label(c) for c in meta.get("code_versions") or []}
                                             | {code_label(r.get("code_version")) for r in mine} - {""})},
        "digests": {"data": {k: v.get("data", {}) for k, v in (identity.get("datasets") or {}).items()},
                    "weights": {m: e.get("weights") for m, e in (identity.get("encoders") or {}).items()
                                if m in keep}},
        "model_card": model_card(chosen, mine),
        "cells": _cells(mine),  # the model, its controls and the baselines it is compared with
        "records": mine,
        "predictions": predictions,
        "predictions_left_out": left_out,  # prediction files named by a record but missing or unreadable
    }


def export_run(run_dir: str | Path, output: str | Path | None = None, model: str | None = None,
               warn: Callable[[str], None] | None = None) -> Path:
    """Write :func:`build_export` atomically (``warn``: each prediction file left out), unless readers refuse it."""
    import warnings
    from functools import partial

    from ppgbench_pl.atomic_io import json_safe, write_text_atomic
    from ppgbench_pl.results import schemas
    from ppgbench_pl.results.plausible import first_problem

    document = build_export(run_dir, model)
    for line in document["predictions_left_out"]:
        (warn or partial(warnings.warn, stacklevel=2))(
            f"{Path(run_dir) / line}; not carried (the report leaves the job out of Table 4)")
    path = Path(output) if output is not None else Path(f"{document['model']}{SUFFIX}")
    if path.is_dir():
        raise DataError(f"{path}: is a folder; give the file to write (e.g. {document['model']}{SUFFIX})")
    text = json.dumps(json_safe(document), indent=1, sort_keys=False, allow_nan=False) + "\n"
    written = json.loads(text)
    if problem := schemas.first_error(written, schemas.EXPORT) or first_problem(written, len(text.encode())):
        raise DataError(f"{run_dir}: the export would not be a valid results file (field {problem}); "
                        "nothing written")
    write_text_atomic(path, text)
    return path
