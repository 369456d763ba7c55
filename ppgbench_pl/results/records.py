"""Job records on disk (protocol.md 11): built in ``jobs/<id>.working/``, renamed to ``jobs/<id>/`` once whole."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.atomic_io import write_json_atomic

RESULTS_FILE = "results.json"


def model_id(model_name: str) -> str:
    """First 12 hex digits of SHA-256 of the model name."""
    return hashlib.sha256(model_name.encode()).hexdigest()[:12]


def job_id(model_name: str, task: str, regime: str, seed: int, fold: int) -> str:
    """``<model_id>__<task>__<regime>__seed<s>__fold<f>``."""
    return f"{model_id(model_name)}__{task}__{regime}__seed{seed}__fold{fold}"


def job_dir(run_dir: Path, jid: str) -> Path:
    """Return the final folder of a job."""
    return Path(run_dir) / "jobs" / jid


def write_job(run_dir: Path, jid: str, record: Mapping[str, Any],
              predictions: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> Path:
    """Write a job's record and prediction files atomically (working folder, then rename)."""
    final = job_dir(run_dir, jid)
    working = final.with_name(final.name + ".working")
    if working.exists():
        shutil.rmtree(working)
    working.mkdir(parents=True)
    try:
        for filename, arrays in (predictions or {}).items():
            with (working / filename).open("wb") as handle:
                np.savez_compressed(handle, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
        write_json_atomic(working / RESULTS_FILE, record)
        if final.exists():  # a stale, incomplete final folder (no results.json) from a crash mid-rename
            shutil.rmtree(final)
        os.replace(working, final)
    except BaseException:  # an interrupt or a full disk mid-write: leave no half-written folder behind
        shutil.rmtree(working, ignore_errors=True)
        raise
    return final


def job_folders(run_dir: str | Path) -> list[str]:
    """Sorted names of a run's job folders, unfinished ``*.working`` ones aside (``NotADirectoryError`` passes)."""
    try:
        entries = os.scandir(Path(run_dir) / "jobs")
        return sorted(e.name for e in entries if e.is_dir() and not e.name.endswith(".working"))
    except FileNotFoundError:
        return []


def working_dirs(run_dir: Path) -> dict[str, Path]:
    """The unfinished ``<id>.working`` folders of a run, by job id."""
    return {p.name[: -len(".working")]: p for p in (Path(run_dir) / "jobs").glob("*.working") if p.is_dir()}


@dataclass
class RecordScan:
    """Readable records (or what ``transform`` made of them), their folders, one ``<path>: <why>`` per bad one."""

    records: list[Any] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_record_file(path: Path) -> dict[str, Any]:
    """Read a ``results.json``; ``ValueError`` with a one-line reason when it is not a readable record."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from None
    if not data.strip():
        raise ValueError("is empty (a job cut off while writing?)")
    try:
        record = json.loads(data)
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:  # thousands of nested brackets: a hostile file, not a record
        raise ValueError("nests too deeply to be a job record") from None
    if not isinstance(record, dict):
        raise ValueError("is not a job record (a JSON object was expected)")
    return record


def scan_records(run_dir: str | Path, transform: Callable[[dict[str, Any]], Any] | None = None) -> RecordScan:
    """Read every complete record once, not stopping at a bad one; ``transform`` applies as each is read."""
    scan = RecordScan()
    jobs = Path(run_dir) / "jobs"
    try:
        names = job_folders(run_dir)
    except NotADirectoryError:
        scan.problems.append(f"{jobs}: is not a folder")
        return scan
    for name in names:
        path = jobs / name / RESULTS_FILE
        if not path.exists():
            continue  # a final folder left without its record by a crash mid-rename: the job reruns
        try:
            record = read_record_file(path)
            item = transform(record) if transform is not None else record
        except ValueError as exc:
            scan.problems.append(f"{path}: {exc}")
            continue
        scan.records.append(item)
        scan.folders.append(path.parent)
    return scan
