"""Job records on disk: the only thing that says a job is done (PROTOCOL.md 7.4).

A job is one (model, task, regime, seed, outer fold). Its folder is built as ``jobs/<id>.working/``
(wiped if a previous attempt left it behind) and renamed to ``jobs/<id>/`` once complete, so a record
that exists is whole, and an interrupted run resumes by skipping the ids that exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.data.processed import write_json_atomic

RESULTS_FILE = "results.json"


def model_id(model_name: str) -> str:
    """First 12 hex digits of SHA-256 of the model name."""
    return hashlib.sha256(model_name.encode()).hexdigest()[:12]


def job_id(model_name: str, task: str, regime: str, seed: int, fold: int) -> str:
    """``<model_id>__<task>__<regime>__seed<s>__fold<f>``."""
    return f"{model_id(model_name)}__{task}__{regime}__seed{seed}__fold{fold}"


def job_dir(run_dir: Path, jid: str) -> Path:
    """Final folder of a job."""
    return Path(run_dir) / "jobs" / jid


def is_complete(run_dir: Path, jid: str) -> bool:
    """A job is complete when its final results.json exists."""
    return (job_dir(run_dir, jid) / RESULTS_FILE).exists()


def write_job(run_dir: Path, jid: str, record: Mapping[str, Any],
              predictions: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> Path:
    """Write a job's record and prediction files atomically (working folder, then rename)."""
    final = job_dir(run_dir, jid)
    working = final.with_name(final.name + ".working")
    if working.exists():
        shutil.rmtree(working)
    working.mkdir(parents=True)
    for filename, arrays in (predictions or {}).items():
        with (working / filename).open("wb") as handle:
            np.savez_compressed(handle, **{k: np.asarray(v) for k, v in arrays.items()})
    write_json_atomic(working / RESULTS_FILE, record)
    if final.exists():  # a stale, incomplete final folder (no results.json) from a crash mid-rename
        shutil.rmtree(final)
    os.replace(working, final)
    return final


def iter_records(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every complete job record of a run folder (working folders are ignored)."""
    jobs = Path(run_dir) / "jobs"
    if not jobs.is_dir():
        return
    for path in sorted(jobs.glob(f"*/{RESULTS_FILE}")):
        if path.parent.name.endswith(".working"):
            continue
        yield json.loads(path.read_text())
