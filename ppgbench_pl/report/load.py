"""Read one or more run folders into one set of job records, the report's only input.

Several folders (say one per model, or a rerun next to the original) combine: a job id that appears more
than once is kept once. A completed record wins over a failed one; two completed records of the same job
that disagree in their metrics are a conflict, and the first folder given wins (the conflict is listed
in the report so it is never silent).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppgbench_pl.cards.overlap import RANDOM_INIT_SUFFIX
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report.inputs import ReportError, read_input
from ppgbench_pl.report.inputs import parameters as read_parameters
from ppgbench_pl.results.fold_entry import code_label
from ppgbench_pl.results.records import RESULTS_FILE, RecordScan, job_id

__all__ = ["CONTROL_MODELS", "LEGACY_CONTROLS", "REGIME_ORDER", "RENAMED_CONTROLS", "ReportError", "RunSet",
           "check_protocols", "is_control", "load_runs", "order_models", "order_regimes", "order_tasks", "record_id",
           "skipped_tasks"]

CONTROL_MODELS = ("prv_neurokit2", "prv_published", "moment_small", "constant")
#: The current name of each control name of older run folders (the NeuroKit2 PRV was called ``prv``): a run
#: that has the old name has run the control.
RENAMED_CONTROLS = {"prv": "prv_neurokit2"}
#: Control names of older run folders.
LEGACY_CONTROLS = tuple(RENAMED_CONTROLS)
REGIME_ORDER = ("linear", "rf", "mlp", "finetune")


@dataclass
class RunSet:
    """Every job record the report uses, combined from one or more run folders.

    Attributes:
        records: Completed (``status == "ok"``) records, one per job id, in a stable order.
        failed: Failed records whose job has no completed record in any folder.
        sources: Job id -> the folder holding its prediction files.
        run_dirs: The folders read, in the order given.
        conflicts: One line per job id whose completed records disagree (first folder kept).
        planned: Union of the planned job ids found in the folders' ``run.json`` (empty if none).
        parameters: Model -> parameter counts, from ``run.json`` ``parameters`` where a run wrote them.
        problems: One line per ``results.json`` that was skipped as unreadable (its job counts as not run).
        run_code_versions: Code versions the folders' ``run.json`` say wrote them (``code_versions``).
        prediction_problems: One line per prediction file that is missing or unreadable (left out of
            Table 4, the rescoring).
        packed: Job id -> prediction file name -> packed arrays, for jobs read from an exported file
            (format version 2 carries them; :meth:`prediction_arrays` unpacks them).
        documents: Exported file -> its document, validated when read (``results/untrusted.py``).

    """

    records: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    sources: dict[str, Path]
    run_dirs: list[Path]
    conflicts: list[str] = field(default_factory=list)
    planned: set[str] = field(default_factory=set)
    parameters: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    run_code_versions: list[str] = field(default_factory=list)
    prediction_problems: list[str] = field(default_factory=list)
    packed: dict[str, dict[str, Any]] = field(default_factory=dict)
    documents: dict[Path, dict[str, Any]] = field(default_factory=dict)

    @property
    def code_versions(self) -> dict[str, int]:
        """Code version label -> completed jobs it made ('' for records that do not say)."""
        counts: dict[str, int] = {}
        for rec in self.records:
            label = code_label(rec.get("code_version"))
            counts[label] = counts.get(label, 0) + 1
        return dict(sorted(counts.items()))

    def warn(self, message: str) -> None:
        """Note a prediction file that was skipped (shown on the page, printed as a warning)."""
        self.prediction_problems.append(message)

    @property
    def skipped(self) -> list[str]:
        """Every file the report skipped: unreadable records, then missing or unreadable predictions."""
        return [*self.problems, *self.prediction_problems]

    @property
    def models(self) -> list[str]:
        """Models with completed records, PPG-specific models first, then the controls in fixed order."""
        names = {r["model"] for r in self.records}
        return order_models(names)

    def job_folder(self, record: dict[str, Any]) -> Path:
        """Return the folder holding a record's prediction files (the file, for a job read from an export)."""
        return self.sources[record_id(record)]

    def has_predictions(self, record: dict[str, Any]) -> bool:
        """Whether the record's prediction files can be looked for (no: an export of format version 1)."""
        return not self.job_folder(record).is_file() or record_id(record) in self.packed

    def prediction_where(self, record: dict[str, Any], name: str) -> str:
        """How a message names one prediction file: its path, or ``<export file>: job <id> <name>``."""
        folder = self.job_folder(record)
        return f"{folder}: job {record_id(record)} {name}" if folder.is_file() else str(folder / name)

    def prediction_arrays(self, record: dict[str, Any], name: str) -> dict[str, Any]:
        """Every array of one of a record's prediction files, from its job folder or its exported file.

        Raises:
            FileNotFoundError: The file does not exist (or the export does not carry it).
            ValueError: It cannot be read (one line saying why).

        """
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
    """Tell a PRV or MOMENT control or a constant baseline (anything not PPG-specific) from a model.

    An untrained control (``moment_small (random init)``) is not PPG-specific either, but it is not the
    control: the findings count only the controls themselves (``FEATURE_CONTROLS``) as present.
    """
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


def record_id(record: dict[str, Any]) -> str:
    """Return the record's job id (recomputed from its fields if an old record lacks one)."""
    if record.get("job_id"):
        return str(record["job_id"])
    return job_id(record["model"], record["task"], record["regime"], int(record["seed"]), int(record["fold"]))


def _outcome(record: dict[str, Any]) -> Any:
    """Return what must agree for two records of one job to count as the same result."""
    return (
        [r.get("metrics") for r in record.get("results", [])],
        record.get("baseline"),
    )


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
    """Refuse an exported file whose protocol settings differ from another input's (one line naming it).

    Only settings both inputs have are compared (two files may cover different datasets or regimes), and
    only where an exported file is involved: run folders combine as they always have.

    Raises:
        ReportError: A shared setting has two values.

    """
    seen: dict[str, tuple[str, Path]] = {}
    for path, protocol in inputs:
        for key, value in sorted(protocol.items()):
            if key not in seen:
                seen[key] = (value, path)
                continue
            first, where = seen[key]
            if value != first and (path.is_file() or where.is_file()):
                raise ReportError(f"{path}: protocol setting {key} is {value}, but {where} has {first}; "
                                  "results made under different settings cannot share a table")


def _merge(scan: RecordScan, run_dir: Path, into: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]],
                                                   dict[str, Path]], conflicts: list[str]) -> None:
    """Add one input's records to (completed, failed, sources): the first completed record of a job wins."""
    ok, failed, sources = into
    for rec, folder in zip(scan.records, scan.folders, strict=True):
        jid = record_id(rec)
        if rec.get("status") != "ok":
            failed.setdefault(jid, rec)
            continue
        if jid not in ok:
            ok[jid] = rec
            sources[jid] = folder
        elif _outcome(ok[jid]) != _outcome(rec):
            kept = sources[jid] if sources[jid].is_file() else sources[jid].parent.parent
            conflicts.append(f"{jid}: {run_dir} disagrees with {kept}; kept {kept}")


def load_runs(run_dirs: Sequence[str | Path]) -> RunSet:
    """Combine run folders; raises :class:`ReportError` when a folder is missing or nothing was completed.

    A ``results.json`` that cannot be read (corrupt, empty, not a record) does not stop the report: it is
    listed in ``problems`` (shown on the page and printed as a warning) and that job counts as not run.

    Args:
        run_dirs: Run folders (``jobs/<id>/results.json``) or ``ppgbench export`` files, in order of
            precedence (an export whose protocol differs from another input's is refused: check_protocols).

    Raises:
        ReportError: A folder does not exist, is not a run folder, holds no job records, has an unreadable
            ``run.json``, or no job completed anywhere.

    """
    if not run_dirs:
        raise ReportError("no run folder given")
    ok: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    sources: dict[str, Path] = {}
    conflicts: list[str] = []
    problems: list[str] = []
    planned: set[str] = set()
    parameters: dict[str, dict[str, int]] = {}
    run_codes: set[str] = set()
    carried: dict[Path, dict[str, Any]] = {}  # exported file (format version 2) -> its predictions
    documents: dict[Path, dict[str, Any]] = {}
    dirs = [Path(d) for d in run_dirs]
    protocols: list[tuple[Path, dict[str, str]]] = []
    for run_dir in dirs:
        meta, scan, protocol = read_input(run_dir)
        protocols.append((run_dir, protocol))
        problems += scan.problems
        if not scan.records:
            detail = f" ({len(scan.problems)} unreadable: {scan.problems[0]})" if scan.problems else ""
            raise ReportError(f"{run_dir}: no job records (expected jobs/<id>/{RESULTS_FILE}){detail}; "
                              "is this a ppgbench run folder, and has a job finished?")
        planned |= {str(j) for j in meta.get("planned_jobs") or []}
        run_codes |= {code_label(c) for c in meta.get("code_versions") or [] if code_label(c)}
        for model, counts in read_parameters(meta, run_dir / "run.json").items():
            parameters.setdefault(model, counts)
        if run_dir.is_file():
            documents[run_dir] = meta["document"]
            carried.update({run_dir: meta["predictions"]} if meta["predictions"] is not None else {})
        _merge(scan, run_dir, (ok, failed, sources), conflicts)
    if not ok:
        raise ReportError(f"no completed jobs in {', '.join(map(str, dirs))} ({len(failed)} failed)")
    check_protocols(protocols)
    return RunSet(
        records=[ok[k] for k in sorted(ok)],
        failed=[failed[k] for k in sorted(failed) if k not in ok],
        sources=sources, run_dirs=dirs, conflicts=conflicts, planned=planned, parameters=parameters,
        problems=problems, run_code_versions=sorted(run_codes), documents=documents,
        packed={j: carried[f].get(j) or {} for j, f in sources.items() if f in carried}, prediction_problems=[
            f"{d}: an exported results file of format version 1 carries no predictions; its jobs are left "
            "out of Table 4 (export the run again for a file that carries them)"
            for d in dirs if d.is_file() and d not in carried])
