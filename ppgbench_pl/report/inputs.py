"""One input of the report, as records: a run folder (``run.json``, ``jobs/*/results.json``) or an exported file.

An exported file is read by the one reader of untrusted results files
(:func:`~ppgbench_pl.results.untrusted.read_results_file`): validated whole before anything is used. A run
folder's ``run.json`` is parsed within the same bounds (size, depth, duplicate keys).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.results.fold_entry import fold_entry
from ppgbench_pl.results.records import RecordScan, scan_records


class ReportError(PPGBenchError):
    """The report cannot be built from the given folders (missing, empty, or not run folders)."""


def run_meta(run_dir: Path) -> dict[str, Any]:
    """Read the folder's ``run.json`` (empty when a run wrote none, e.g. records copied by hand)."""
    from ppgbench_pl.results.untrusted import loads_bounded, max_file_bytes, read_bytes_bounded

    path = run_dir / "run.json"
    if not path.exists():
        return {}
    try:
        meta = loads_bounded(read_bytes_bounded(path, max_file_bytes()))  # bounded: a folder may be sent too
    except ValueError as exc:
        raise ReportError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(meta, dict):
        raise ReportError(f"{path}: not a run description (a JSON object was expected)")
    return meta


def parameters(meta: dict[str, Any], source: Path) -> dict[str, dict[str, int]]:
    """``run.json`` ``parameters``: {model: {"total": n, "trainable": n}} or {model: n}, if present."""
    out: dict[str, dict[str, int]] = {}
    raw = meta.get("parameters") or {}
    try:
        for model, value in raw.items():
            if isinstance(value, int):
                out[model] = {"total": value}
            else:
                out[model] = {k: int(v) for k, v in value.items()}
    except (AttributeError, TypeError, ValueError):
        raise ReportError(f"{source}: 'parameters' must map model names to counts") from None
    return out


def check_record(record: dict[str, Any]) -> dict[str, Any]:
    """Check a record the report uses; ``ValueError`` names what is missing (reported, then skipped)."""
    if record.get("status") != "ok":
        if not record.get("job_id") and record.get("model") is None:
            raise ValueError("is not a job record (no job_id or model)")
        return record
    fold_entry(record)  # the summary's own checks: required fields, results a list of repeats
    if record.get("kind") is None:
        raise ValueError("missing field 'kind'")
    return record


def _check_folder(run_dir: Path) -> None:
    """Raise a one-line error unless ``run_dir`` looks like a run folder."""
    if not run_dir.exists():
        raise ReportError(f"{run_dir}: no such run folder")
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a run folder (it is a file; give the folder holding run.json "
                          "and jobs/)")
    if not (run_dir / "jobs").is_dir() and not (run_dir / "run.json").is_file():
        raise ReportError(f"{run_dir}: not a ppgbench run folder (no run.json and no jobs/ inside)")


def read_input(path: Path) -> tuple[dict[str, Any], RecordScan, dict[str, str]]:
    """(run.json-like meta, the records, the protocol settings) of a run folder or an exported file."""
    from ppgbench_pl.results.export import protocol_settings
    from ppgbench_pl.results.untrusted import read_results_file

    if not (path.is_file() and path.suffix == ".json"):  # an exported file is JSON; anything else a folder
        _check_folder(path)
        meta = run_meta(path)
        scan = scan_records(path, transform=check_record)
        return meta, scan, protocol_settings(meta.get("identity") or {}, scan.records)
    document = read_results_file(path)  # validated whole (schema, ranges, protocol) before anything is used
    run, versions = document["run"], document["versions"]
    meta = {"planned_jobs": run["planned_jobs"], "parameters": run["parameters"], "document": document,
            "code_versions": versions["code_versions"], "predictions": document.get("predictions")}
    scan = RecordScan()
    for i, record in enumerate(document["records"]):
        try:
            scan.records.append(check_record(record))
            scan.folders.append(path)
        except ValueError as exc:
            scan.problems.append(f"{path}: record {i}: {exc}")
    return meta, scan, {str(k): str(v) for k, v in document["protocol"].items()}
