"""Read run folders and exported files into one set of job records, the report's only input.

A job seen twice is kept once: completed beats failed; of two completed records the first input's wins.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.cards.overlap import RANDOM_INIT_SUFFIX
from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.results.export import protocol_settings
from ppgbench_pl.results.fold_entry import code_label, fold_entry
from ppgbench_pl.results.records import RESULTS_FILE, RecordScan, job_id, scan_records
from ppgbench_pl.results.untrusted import loads_bounded, max_file_bytes, read_bytes_bounded, read_results_file

if TYPE_CHECKING:
    import pandas as pd

CONTROL_MODELS = ("prv_neurokit2", "prv_published", "moment_small", "constant")
#: The current name of each control name of older run folders (the NeuroKit2 PRV was called ``prv``).
RENAMED_CONTROLS = {"prv": "prv_neurokit2"}
LEGACY_CONTROLS = tuple(RENAMED_CONTROLS)
REGIME_ORDER = ("linear", "rf", "mlp", "finetune")


class ReportError(PPGBenchError):
    """The report cannot be built from the given folders (missing, empty, or not run folders)."""


@dataclass
class RunSet:
    """Every job record the report uses, combined from one or more run folders or exported files."""

    records: list[dict[str, Any]]  # completed, one per job id, in a stable order
    failed: list[dict[str, Any]]  # failed records whose job has no completed record anywhere
    sources: dict[str, Path]  # job id -> its job folder, or the exported file it came from
    run_dirs: list[Path]
    conflicts: list[str] = field(default_factory=list)
    planned: set[str] = field(default_factory=set)  # union of the inputs' planned job ids
    parameters: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one line per unreadable results.json
    run_code_versions: list[str] = field(default_factory=list)
    prediction_problems: list[str] = field(default_factory=list)  # missing or unreadable prediction files
    packed: dict[str, dict[str, Any]] = field(default_factory=dict)  # job id -> file name -> packed arrays
    documents: dict[Path, dict[str, Any]] = field(default_factory=dict)  # exported file -> its document

    @property
    def code_versions(self) -> dict[str, int]:
        """Code version label -> completed jobs it made ('' for records that do not say)."""
        return dict(sorted(Counter(code_label(rec.get("code_version")) for rec in self.records).items()))

    @property
    def skipped(self) -> list[str]:
        """Every file the report skipped: unreadable records, then missing or unreadable predictions."""
        return [*self.problems, *self.prediction_problems]

    @property
    def models(self) -> list[str]:
        """Models with completed records, PPG-specific models first, then the controls in fixed order."""
        return order_models({r["model"] for r in self.records})

    def job_folder(self, record: dict[str, Any]) -> Path:
        """Return the folder holding a record's prediction files (the file, for a job read from an export)."""
        return self.sources[record_id(record)]

    def prediction_where(self, record: dict[str, Any], name: str) -> str:
        """How a message names one prediction file: its path, or ``<export file>: job <id> <name>``."""
        folder = self.job_folder(record)
        return f"{folder}: job {record_id(record)} {name}" if folder.is_file() else str(folder / name)

    def prediction_arrays(self, record: dict[str, Any], name: str) -> dict[str, Any]:
        """Every array of a record's prediction file; FileNotFoundError, or ValueError saying why it is unreadable."""
        import zipfile
        import zlib

        import numpy as np

        folder = self.job_folder(record)
        if folder.is_file():
            from ppgbench_pl.results.packed_arrays import unpack_all

            packed = self.packed.get(record_id(record), {})
            if name not in packed:
                raise FileNotFoundError(self.prediction_where(record, name))
            return unpack_all(packed[name])
        try:
            with np.load(folder / name, allow_pickle=False) as arrays:
                return {k: arrays[k] for k in arrays.files}
        except FileNotFoundError:
            raise
        except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as exc:
            raise ValueError(f"is not a readable .npz file ({exc})".splitlines()[0]) from None


def _baseline_key(name: str) -> tuple[Any, ...]:
    """``constant`` first, then per-rate baselines by rate, then per-model ones."""
    rest = name[len("constant"):]
    rate = rest[2:].split("Hz", 1)[0] if rest.startswith(" @") else ""
    try:
        number = float(rate) if rate else -1.0
    except ValueError:
        number = float("inf")
    return (number, name)


def order_models(names: set[str] | Sequence[str]) -> list[str]:
    """Non-control models by name, then the PRV and MOMENT controls, then the baselines."""
    names = set(names)
    controls = [c for c in (*CONTROL_MODELS, *LEGACY_CONTROLS) if c in names and not is_baseline(c)]
    untrained = sorted(n for n in names if is_control(n) and n not in controls and not is_baseline(n))
    baselines = sorted((n for n in names if is_baseline(n)), key=_baseline_key)
    return sorted(n for n in names if not is_control(n)) + controls + untrained + baselines


def is_control(name: str) -> bool:
    """Whether a model is a PRV or MOMENT control (random init included) or a constant baseline."""
    base = name.removesuffix(RANDOM_INIT_SUFFIX)
    return base in CONTROL_MODELS or base in LEGACY_CONTROLS or is_baseline(name)


def order_regimes(names: set[str] | Sequence[str]) -> list[str]:
    """Order the protocol's regimes as the protocol does, then any user regimes by name."""
    names = set(names)
    return [r for r in REGIME_ORDER if r in names] + sorted(names - set(REGIME_ORDER))


def order_tasks(names: set[str] | Sequence[str]) -> list[str]:
    """Order known tasks as the registry does (protocol.md section 3), then unknown tasks by name."""
    from ppgbench_pl.data.registry import TASKS

    names = set(names)
    return [t for t in TASKS if t in names] + sorted(names - set(TASKS))


def in_order(frame: pd.DataFrame, columns: Sequence[str] = ("regime", "task", "model")) -> pd.DataFrame:
    """``frame`` sorted stably by the protocol's order of its regime, task and model ``columns``."""
    order = {"regime": order_regimes, "task": order_tasks, "model": order_models}
    keys = {c: {v: i for i, v in enumerate(order[c](set(frame[c])))} for c in columns}
    return frame.sort_values(list(columns), key=lambda col: col.map(keys[col.name]), kind="stable")


def record_id(record: dict[str, Any]) -> str:
    """Return the record's job id (recomputed from its fields if an old record lacks one)."""
    if record.get("job_id"):
        return str(record["job_id"])
    return job_id(record["model"], record["task"], record["regime"], int(record["seed"]), int(record["fold"]))


def skipped_tasks(run_dirs: Sequence[Path]) -> dict[str, str]:
    """Task -> why a run skipped it (``status.json`` ``skipped_tasks``: it could not be evaluated)."""
    found: dict[str, str] = {}
    for run_dir in run_dirs:
        try:
            listed = json.loads((Path(run_dir) / "status.json").read_text()).get("skipped_tasks") or {}
            found.update({str(task): str(why) for task, why in dict(listed).items()})
        except (OSError, ValueError, AttributeError, TypeError, RecursionError):
            continue  # an export file, or a folder without a readable status.json
    return found


def check_protocols(inputs: Sequence[tuple[Path, dict[str, str]]]) -> None:
    """Refuse an exported file whose protocol settings (those both inputs have) differ from another input's."""
    seen: dict[str, tuple[str, Path]] = {}
    for path, protocol in inputs:
        for key, value in sorted(protocol.items()):
            first, where = seen.setdefault(key, (value, path))
            if value != first and (path.is_file() or where.is_file()):
                raise ReportError(f"{path}: protocol setting {key} is {value}, but {where} has {first}; "
                                  "results made under different settings cannot share a table")


def parameter_counts(raw: Any) -> dict[str, dict[str, int]]:
    """{model: {"total": n, "trainable": n}} from that or {model: n}; TypeError, ValueError or AttributeError."""
    return {m: {"total": int(v)} if isinstance(v, int) else {k: int(x) for k, x in v.items()} for m, v in raw.items()}


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


def read_input(path: Path) -> tuple[dict[str, Any], RecordScan, dict[str, str]]:
    """(meta, records, protocol settings) of an exported file, or of a folder (``run.json`` read as a sent file)."""
    if path.is_file() and path.suffix == ".json":  # an exported file is JSON; anything else a folder
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
    if not path.exists():
        raise ReportError(f"{path}: no such run folder")
    if not path.is_dir():
        raise ReportError(f"{path}: not a run folder (it is a file; give the folder holding run.json and jobs/)")
    if not (path / "jobs").is_dir() and not (path / "run.json").is_file():
        raise ReportError(f"{path}: not a ppgbench run folder (no run.json and no jobs/ inside)")
    meta = {}
    if (path / "run.json").exists():
        try:
            meta = loads_bounded(read_bytes_bounded(path / "run.json", max_file_bytes()))
        except ValueError as exc:
            raise ReportError(f"{path / 'run.json'}: {exc}") from None
        except OSError as exc:
            raise ReportError(f"{path / 'run.json'}: cannot be read ({exc.strerror or exc})") from None
        if not isinstance(meta, dict):
            raise ReportError(f"{path / 'run.json'}: not a run description (a JSON object was expected)")
    scan = scan_records(path, transform=check_record)
    return meta, scan, protocol_settings(meta.get("identity") or {}, scan.records)


def _outcome(record: dict[str, Any]) -> Any:
    """What must agree for two records of one job to count as the same result."""
    return [r.get("metrics") for r in record.get("results", [])], record.get("baseline")


def load_runs(run_dirs: Sequence[str | Path]) -> RunSet:
    """Combine run folders (``jobs/<id>/results.json``) and ``ppgbench export`` files, in order of precedence.

    Raises:
        ReportError: An input is missing, not a run folder or results file, holds no job records, has an
            unreadable ``run.json``, or a protocol that differs from another input's; or no job completed.

    """
    if not run_dirs:
        raise ReportError("no run folder given")
    dirs = [Path(d) for d in run_dirs]
    runs = RunSet([], [], {}, dirs)
    ok: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    run_codes: set[str] = set()
    carried: dict[Path, dict[str, Any]] = {}  # exported file (format version 2) -> its predictions
    protocols: list[tuple[Path, dict[str, str]]] = []
    for run_dir in dirs:
        meta, scan, protocol = read_input(run_dir)
        protocols.append((run_dir, protocol))
        runs.problems += scan.problems
        if not scan.records:
            detail = f" ({len(scan.problems)} unreadable: {scan.problems[0]})" if scan.problems else ""
            raise ReportError(f"{run_dir}: no job records (expected jobs/<id>/{RESULTS_FILE}){detail}; "
                              "is this a ppgbench run folder, and has a job finished?")
        runs.planned |= {str(j) for j in meta.get("planned_jobs") or []}
        run_codes |= {code_label(c) for c in meta.get("code_versions") or [] if code_label(c)}
        try:
            for model, counts in parameter_counts(meta.get("parameters") or {}).items():
                runs.parameters.setdefault(model, counts)
        except (AttributeError, TypeError, ValueError):
            raise ReportError(f"{run_dir / 'run.json'}: 'parameters' must map model names to counts") from None
        if run_dir.is_file():
            runs.documents[run_dir] = meta["document"]
            carried.update({run_dir: meta["predictions"]} if meta["predictions"] is not None else {})
        for rec, folder in zip(scan.records, scan.folders, strict=True):  # the first completed record wins
            jid = record_id(rec)
            if rec.get("status") != "ok":
                failed.setdefault(jid, rec)
            elif jid not in ok:
                ok[jid], runs.sources[jid] = rec, folder
            elif _outcome(ok[jid]) != _outcome(rec):
                kept = runs.sources[jid] if runs.sources[jid].is_file() else runs.sources[jid].parent.parent
                runs.conflicts.append(f"{jid}: {run_dir} disagrees with {kept}; kept {kept}")
    if not ok:
        raise ReportError(f"no completed jobs in {', '.join(map(str, dirs))} ({len(failed)} failed)")
    check_protocols(protocols)
    runs.records = [ok[k] for k in sorted(ok)]
    runs.failed = [failed[k] for k in sorted(failed) if k not in ok]
    runs.run_code_versions = sorted(run_codes)
    runs.packed = {j: carried[f].get(j) or {} for j, f in runs.sources.items() if f in carried}
    runs.prediction_problems = [
        f"{d}: an exported results file of format version 1 carries no predictions; its jobs are left out of Table 4 "
        "(export the run again for a file that carries them)" for d in dirs if d.is_file() and d not in carried]
    return runs
