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

from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.results.records import RESULTS_FILE, iter_records, job_dir, job_id

CONTROL_MODELS = ("prv", "prv_published", "moment_small", "constant")
REGIME_ORDER = ("linear", "rf", "mlp", "finetune")


class ReportError(PPGBenchError):
    """The report cannot be built from the given folders (missing, empty, or not run folders)."""


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
    """

    records: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    sources: dict[str, Path]
    run_dirs: list[Path]
    conflicts: list[str] = field(default_factory=list)
    planned: set[str] = field(default_factory=set)
    parameters: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        """Models with completed records, PPG-specific models first, then the controls in fixed order."""
        names = {r["model"] for r in self.records}
        return order_models(names)

    def job_folder(self, record: dict[str, Any]) -> Path:
        """The folder holding a record's prediction files."""
        return self.sources[record_id(record)]


def order_models(names: set[str] | Sequence[str]) -> list[str]:
    """Non-control models by name, then ``prv``, ``prv_published``, ``moment_small``, ``constant``."""
    names = set(names)
    return sorted(n for n in names if n not in CONTROL_MODELS) + [c for c in CONTROL_MODELS if c in names]


def order_regimes(names: set[str] | Sequence[str]) -> list[str]:
    """The protocol's regimes in protocol order, then any user regimes by name."""
    names = set(names)
    return [r for r in REGIME_ORDER if r in names] + sorted(names - set(REGIME_ORDER))


def order_tasks(names: set[str] | Sequence[str]) -> list[str]:
    """Registry order (PROTOCOL.md section 2) for known tasks, then unknown tasks by name."""
    from ppgbench_pl.data.registry import TASKS

    names = set(names)
    return [t for t in TASKS if t in names] + sorted(names - set(TASKS))


def record_id(record: dict[str, Any]) -> str:
    """The record's job id (recomputed from its fields if an old record lacks one)."""
    if record.get("job_id"):
        return str(record["job_id"])
    return job_id(record["model"], record["task"], record["regime"], int(record["seed"]), int(record["fold"]))


def _outcome(record: dict[str, Any]) -> Any:
    """What must agree for two records of one job to count as the same result."""
    return (
        [r.get("metrics") for r in record.get("results", [])],
        record.get("baseline"),
    )


def _run_meta(run_dir: Path) -> dict[str, Any]:
    """The folder's ``run.json`` (empty when a run wrote none, e.g. records copied by hand)."""
    path = run_dir / "run.json"
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not valid JSON ({exc.msg})") from None


def _parameters(meta: dict[str, Any]) -> dict[str, dict[str, int]]:
    """``run.json`` ``parameters``: {model: {"total": n, "trainable": n}} or {model: n}, if present."""
    out: dict[str, dict[str, int]] = {}
    for model, value in (meta.get("parameters") or {}).items():
        if isinstance(value, int):
            out[model] = {"total": value}
        else:
            out[model] = {k: int(v) for k, v in value.items()}
    return out


def load_runs(run_dirs: Sequence[str | Path]) -> RunSet:
    """Combine run folders; raises :class:`ReportError` when a folder is missing or nothing was completed.

    Args:
        run_dirs: Run folders (each with ``jobs/<id>/results.json``), in order of precedence.

    Returns:
        The combined records.

    Raises:
        ReportError: A folder does not exist, holds no job records, or no job completed anywhere.
    """
    if not run_dirs:
        raise ReportError("no run folder given")
    ok: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    sources: dict[str, Path] = {}
    conflicts: list[str] = []
    planned: set[str] = set()
    parameters: dict[str, dict[str, int]] = {}
    dirs = [Path(d) for d in run_dirs]
    for run_dir in dirs:
        if not run_dir.is_dir():
            raise ReportError(f"{run_dir}: no such run folder")
        records = list(iter_records(run_dir))
        if not records:
            raise ReportError(f"{run_dir}: no job records (expected jobs/<id>/{RESULTS_FILE}); "
                              "is this a ppgbench run folder, and has a job finished?")
        meta = _run_meta(run_dir)
        planned |= set(meta.get("planned_jobs") or [])
        for model, counts in _parameters(meta).items():
            parameters.setdefault(model, counts)
        for rec in records:
            jid = record_id(rec)
            if rec.get("status") != "ok":
                failed.setdefault(jid, rec)
                continue
            if jid not in ok:
                ok[jid] = rec
                sources[jid] = job_dir(run_dir, jid)
            elif _outcome(ok[jid]) != _outcome(rec):
                kept = sources[jid].parent.parent
                conflicts.append(f"{jid}: {run_dir} disagrees with {kept}; kept {kept}")
    if not ok:
        raise ReportError(f"no completed jobs in {', '.join(map(str, dirs))} ({len(failed)} failed)")
    return RunSet(
        records=[ok[k] for k in sorted(ok)],
        failed=[failed[k] for k in sorted(failed) if k not in ok],
        sources=sources, run_dirs=dirs, conflicts=conflicts, planned=planned, parameters=parameters,
    )
