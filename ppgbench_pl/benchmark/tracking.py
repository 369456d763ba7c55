"""W&B mirroring the run folder, one run per cell (``per-job``: per job too); offline unless logged in, optional.

A cell's run holds its ``summary.csv`` row as summary (so sorting runs sorts cells) and one history step per job.
"""

from __future__ import annotations

import hashlib
import json
import math
import netrc
import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.benchmark.job import read_record
from ppgbench_pl.results.fold_entry import MalformedRecord, code_label, fold_entry, record_deviations

WANDB_CHOICES = ("group", "per-job", "off")


def wandb_logged_in() -> bool:
    """True when an API key is available (environment or the netrc entry ``wandb login`` writes)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return any("wandb" in host for host in netrc.netrc().hosts)
    except (FileNotFoundError, OSError, netrc.NetrcParseError):
        return False


def wandb_mode() -> str:
    """``WANDB_MODE`` when set, else ``online`` when logged in, else ``offline``."""
    return os.environ.get("WANDB_MODE") or ("online" if wandb_logged_in() else "offline")


def offline_notice(run_dir: Path) -> str | None:
    """The line saying W&B went offline because nobody is logged in (None when the user chose the mode)."""
    if os.environ.get("WANDB_MODE") or wandb_logged_in():
        return None
    return (f"W&B: offline (not logged in): runs are written under {Path(run_dir) / 'wandb'}; "
            f"`wandb sync {Path(run_dir) / 'wandb'}/offline-run-*` uploads them")


def wandb_enabled(setting: str) -> bool:
    """Whether anything is logged to W&B for a ``--wandb`` setting."""
    if setting not in WANDB_CHOICES:
        raise ValueError(f"--wandb must be one of {', '.join(WANDB_CHOICES)}, got {setting!r}")
    return setting != "off" and wandb_mode() != "disabled"


#: W&B's own folders, pointed into the run folder unless the user set them.
WANDB_DIR_VARIABLES = {"WANDB_DATA_DIR": "data", "WANDB_CACHE_DIR": "cache", "WANDB_ARTIFACT_DIR": "artifacts"}
_USER_DIRS: dict[str, str] | None = None


def close_wandb() -> None:
    """Stop W&B's service process, so a later run in this process starts one with its own folders."""
    if "wandb" in sys.modules:
        try:
            sys.modules["wandb"].teardown()
        except Exception as exc:  # noqa: BLE001 - never fail a run because W&B could not shut down
            warnings.warn(f"W&B shutdown failed: {exc}", stacklevel=2)


#: The summary of a cell's W&B run: its aggregates, as summary.csv has them.
AGGREGATES = ("mean", "ci95", "ci_low", "ci_high", "n_seeds", "n_folds", "mdd", "baseline_mean")
#: Flat config keys every cell run carries (for W&B's filters and parallel coordinates).
DESCRIPTORS = ("dataset", "metric", "unit", "higher_is_better", "budget", "ci_unit", "backend", "code_version",
               "pretraining_overlap", "deviations")
#: Descriptors that are also tags, as ``key:value``, when they say something (W&B filters on tags fastest).
TAGGED = {"backend": (), "pretraining_overlap": ("none", "unknown"), "deviations": ("",)}
#: History keys (per job) kept out of the run summary.
PER_JOB = ("seed", "fold", "ok", "seconds", "test/*", "baseline/*", "params/*", "jobs", "optuna_trials")


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def aggregates(row: dict[str, Any] | None) -> dict[str, Any]:
    """The summary of a cell run: the finite aggregates of its summary row (counts as integers)."""
    values = {key: _finite((row or {}).get(key)) for key in AGGREGATES}
    return {k: int(v) if k in ("n_seeds", "n_folds") else v for k, v in values.items() if v is not None}


def descriptors(row: dict[str, Any] | None, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The flat config of a cell run (from its summary row, else its first record)."""
    first = records[0] if records else {}
    out: dict[str, Any] = {"metric": first.get("metric"), **record_labels(first)}
    for key in DESCRIPTORS:
        value = (row or {}).get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            out[key] = bool(value) if key == "higher_is_better" else value
    return out


def record_labels(record: dict[str, Any]) -> dict[str, Any]:
    """A record's labels as flat config: budget, the backend that ran, code version, overlap, deviations."""
    return {"budget": record.get("budget") or "published", "backend": record.get("backend"),
            "code_version": code_label(record.get("code_version")),
            "pretraining_overlap": record.get("pretraining_overlap"), "deviations": record_deviations(record)}


def run_tags(config: dict[str, Any], *extra: str) -> list[str]:
    """A run's tags: task, regime, dataset, budget, then the descriptors that say something as ``key:value``."""
    tags = [str(config[k]) for k in ("task", "regime", "dataset", "budget") if config.get(k)]
    tags += [f"{k}:{config[k]}"[:64] for k, plain in TAGGED.items() if config.get(k) and config[k] not in plain]
    return [*dict.fromkeys(tags), *extra]


def _short_id(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _start_run(run_dir: Path, project: str, run_id: str, name: str, group: str, job_type: str,
               config: dict[str, Any], tags: Sequence[str]) -> Any:
    global _USER_DIRS
    if _USER_DIRS is None:
        _USER_DIRS = {k: os.environ[k] for k in WANDB_DIR_VARIABLES if k in os.environ}
    for variable, sub in WANDB_DIR_VARIABLES.items():
        if variable not in _USER_DIRS:
            os.environ[variable] = str((Path(run_dir) / "wandb" / sub).resolve())
    import wandb

    settings = wandb.Settings(init_timeout=float(os.environ.get("WANDB_INIT_TIMEOUT", "10")), silent=True,
                              console="off", x_disable_stats=True, disable_git=True, save_code=False,
                              disable_job_creation=True, x_disable_machine_info=True, x_save_requirements=False)
    run_dir.mkdir(parents=True, exist_ok=True)
    where = str(run_dir.resolve())  # absolute: the W&B service process keeps the cwd it started in
    mode: Any = wandb_mode()
    return wandb.init(project=project, dir=where, mode=mode, id=run_id, resume="allow", name=name,
                      group=group, job_type=job_type, config=config, tags=list(tags), settings=settings,
                      reinit="create_new")


#: Written when W&B failed in this invocation: later cells and per-job runs (any worker) skip W&B, not wait again.
OFF_MARKER = Path("wandb") / ".ppgbench-off"


def _value(record: dict[str, Any]) -> float | None:
    found = [(r.get("metrics") or {}).get(record["metric"]) for r in record.get("results", [])]
    values = [float(v) for v in found if v is not None]
    return sum(values) / len(values) if values else None


def _log_records(run: Any, records: Sequence[dict[str, Any]]) -> None:
    """One step per job, a jobs table and (when the regime searched) the Optuna trials table."""
    import wandb

    jobs, trials = [], []
    for step, rec in enumerate(sorted(records, key=lambda r: (r.get("seed", 0), r.get("fold", 0)))):
        metric, ok, results = rec.get("metric", "value"), rec.get("status") == "ok", rec.get("results", [])
        value, baseline = (_value(rec) if ok else None), (rec.get("baseline") or {}).get(metric)
        row: dict[str, Any] = {"seed": rec.get("seed"), "fold": rec.get("fold"), "ok": ok,
                               "seconds": rec.get("seconds")}
        if ok:
            params = (results[0] if results else {}).get("params") or {}
            row.update({f"test/{metric}": value, f"baseline/{metric}": baseline,
                        **{f"params/{k}": v for k, v in params.items() if isinstance(v, (int, float, str, bool))}})
        run.log(row, step=step)
        where = [rec.get("job_id"), rec.get("seed"), rec.get("fold")]
        jobs.append([*where, rec.get("status"), value, baseline, json.dumps([r.get("params") for r in results],
                     default=str), rec.get("seconds"), rec.get("error")])
        trials += [[*where, result.get("repeat"), t.get("number"), t.get("state"), t.get("value"),
                    json.dumps(t.get("params"), default=str), json.dumps(t.get("intermediate_values"), default=str)]
                   for result in results for t in (result.get("optuna") or {}).get("trials", [])]
    tables = {"jobs": wandb.Table(columns=["job_id", "seed", "fold", "status", "value", "baseline", "params", "seconds",
                                           "error"], data=jobs)}
    if trials:
        tables["optuna_trials"] = wandb.Table(columns=["job_id", "seed", "fold", "repeat", "trial", "state", "value",
                                                       "params", "intermediate_values"], data=trials)
    run.log(tables)


class CellTracker:
    """Logs each cell (``cells``: cell -> its job ids) as one W&B run once its ``pending`` jobs are finished.

    ``summary_of`` gives the cell's ``summary.csv`` row over the whole run folder (None: no row yet).
    """

    def __init__(self, run_dir: Path, project: str, run_uid: str, config: dict[str, Any],
                 cells: dict[tuple[str, str, str], list[str]], pending: Iterable[str],
                 summary_of: Callable[[tuple[str, str, str]], dict[str, Any] | None]) -> None:
        self.run_dir, self.project, self.run_uid, self.config = Path(run_dir), project, run_uid, config
        self.summary_of = summary_of
        self.cells = cells
        owner = {jid: cell for cell, ids in cells.items() for jid in ids}
        self.remaining = Counter(owner[jid] for jid in pending if jid in owner)
        self.owner, self.logged, self.enabled = owner, 0, True
        (self.run_dir / OFF_MARKER).unlink(missing_ok=True)  # a new invocation tries W&B again

    def _marked(self, cell: tuple[str, str, str], mark: dict[str, Any], write: bool = False) -> bool:
        """Whether the file saying which records of a cell W&B has says ``mark`` (``write``: make it say so)."""
        path = self.run_dir / "wandb" / ".ppgbench-cells" / f"{_short_id(*cell)}.json"
        if write:
            write_json_atomic(path, {"cell": list(cell), **mark})
        return path.exists() and {k: json.loads(path.read_text()).get(k) for k in mark} == mark

    def start(self) -> None:
        """Log cells that have nothing left to run but are not (or not fully) in W&B yet."""
        for cell in self.cells:
            if self.remaining[cell] == 0:
                self._log(cell)

    def finished(self, jid: str) -> None:
        """Count a finished job; log its cell when it was the cell's last."""
        if (cell := self.owner.get(jid)) is not None:
            self.remaining[cell] -= 1
            if self.remaining[cell] == 0:
                self._log(cell)

    def _log(self, cell: tuple[str, str, str]) -> None:
        if not self.enabled:
            return
        found = [r for jid in self.cells[cell] if (r := read_record(self.run_dir, jid)) is not None]
        records = []
        for record in found:
            with suppress(MalformedRecord):  # W&B mirrors what the summary accepts
                fold_entry(record)
                records.append(record)
        if len(records) < len(found):
            warnings.warn(f"W&B: {len(found) - len(records)} damaged record(s) of {'/'.join(cell)} left out (the "
                          "summary leaves them out too)", stacklevel=2)
        if not records or (self.run_dir / OFF_MARKER).exists():
            return
        state = sorted(f"{r['job_id']}:{r.get('status')}" for r in records)
        row = self.summary_of(cell)  # over the folder: another plan's records may have changed it
        mark = {"records": state, "row": None if row is None else [int(row["n_folds"]), float(row["mean"])]}
        if self._marked(cell, mark):
            return
        model, task, regime = cell
        try:
            config = {"benchmark": self.config, "model": model, "task": task, "regime": regime,
                      **descriptors(row, records)}
            self._cell_run(cell, config, row, records)
            name = str((row or {}).get("baseline") or "")  # the constant baseline's run of this (task, regime)
            if name and ";" not in name and (base := self.summary_of((name, task, regime))) is not None:
                self._cell_run((name, task, regime), {**config, "model": name}, base, records,
                               {"row": [int(base["n_folds"]), float(base["mean"])]})
        except Exception as exc:  # noqa: BLE001 - W&B mirrors the run folder and is never required
            warnings.warn(f"W&B logging failed and is off for the rest of this run: {exc}", stacklevel=2)
            self.enabled = False
            write_json_atomic(self.run_dir / OFF_MARKER, {"why": str(exc)})
            return
        self._marked(cell, mark, write=True)
        self.logged += 1

    def _cell_run(self, cell: tuple[str, str, str], config: dict[str, Any], row: dict[str, Any] | None,
                  records: list[dict[str, Any]], baseline_mark: dict[str, Any] | None = None) -> None:
        """One W&B run of a cell, or (``baseline_mark``) of its constant baseline unless W&B has that row already."""
        if baseline_mark and self._marked(cell, baseline_mark):
            return
        tags = run_tags(config, "baseline") if baseline_mark else run_tags(config)
        run = _start_run(self.run_dir, self.project, _short_id(self.run_uid, *cell), "/".join(cell),
                         f"{cell[1]}/{cell[2]}", cell[2], config, tags)
        for key in PER_JOB:  # every per-job history key and table stays out of the run's summary
            run.define_metric(key, summary="none")
        if baseline_mark:  # one step per ok job: seed, fold and the constant baseline's value on that fold
            step = 0
            for rec in sorted(records, key=lambda r: (r.get("seed", 0), r.get("fold", 0))):
                metric = rec.get("metric", "value")
                value = _finite((rec.get("baseline") or {}).get(metric))
                if rec.get("status") == "ok" and value is not None:
                    run.log({"seed": rec.get("seed"), "fold": rec.get("fold"), f"test/{metric}": value}, step=step)
                    step += 1
        else:
            _log_records(run, records)
        run.summary.update(aggregates(row))
        run.finish()
        if baseline_mark:
            self._marked(cell, baseline_mark, write=True)


def log_job_run(spec: Any, record: dict[str, Any], config: dict[str, Any]) -> None:
    """``--wandb per-job``: one W&B run for one finished job (called in the worker that ran it)."""
    if wandb_mode() == "disabled" or (Path(spec.run_dir) / OFF_MARKER).exists():
        return
    model, task, regime = record.get("model", "?"), record.get("task", "?"), record.get("regime", "?")
    try:
        flat = {"benchmark": config, "job_id": spec.job_id, "model": model, "task": task, "regime": regime,
                "seed": record.get("seed"), "fold": record.get("fold"), **record_labels(record)}
        run = _start_run(Path(spec.run_dir), spec.wandb_project, _short_id(spec.run_uid, spec.job_id), spec.job_id,
                         f"{model}/{task}/{regime}", regime, flat, run_tags(flat, "job"))
        _log_records(run, [record])
        run.summary.update({"status": record.get("status"), "value": _value(record) if record.get("status") == "ok"
                            else None})
        run.finish()
    except Exception as exc:  # noqa: BLE001 - never fail a job because of W&B
        warnings.warn(f"W&B logging of job {spec.job_id} failed and is off for the rest of this run: {exc}",
                      stacklevel=2)
        write_json_atomic(Path(spec.run_dir) / OFF_MARKER, {"why": str(exc)})
