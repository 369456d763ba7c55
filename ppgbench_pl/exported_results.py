"""Results read back (no torch): a run folder (:class:`Results`) or a file from ``ppgbench export`` (validated whole).

``pb.load_run`` opens either; :class:`ExportedResults` reads an exported file like a run folder.
"""

from __future__ import annotations

import numbers
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import DataError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from ppgbench_pl.benchmark.run_report import RunReport
    from ppgbench_pl.results.fold_entry import FoldEntry


#: Columns every ``summary.csv`` row has (a table without them is not a ppgbench summary).
SUMMARY_KEYS = ("model", "task", "regime", "metric", "mean")
#: Columns of :attr:`Results.jobs` (then one ``param.<name>`` column per selected hyperparameter).
JOB_COLUMNS = ("job_id", "model", "task", "regime", "seed", "fold", "status", "metric", "value", "baseline",
               "metrics", "params", "n_repeats", "backend", "seconds", "error")


def foreign_record(record: dict[str, Any], folder: Path) -> str | None:
    """Why a readable ``results.json`` is not this job's ppgbench record (foreign or damaged), else None."""
    missing = [key for key in ("job_id", "status") if not isinstance(record.get(key), str)]
    if missing:
        return f"is not a ppgbench job record (no {' or '.join(missing)})"
    if record["job_id"] != folder.name:
        return f"is the record of job {record['job_id']!r}, not of its folder {folder.name!r} (copied in?)"
    results = record.get("results", [])
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        return "has 'results' that are not a list of repeats (damaged)"
    return None


def read_summary(path: Path) -> tuple[pd.DataFrame | None, str]:
    """``summary.csv`` as a table, or (None, why it is not a ppgbench summary)."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        return None, f"cannot be read as CSV ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    missing = [column for column in SUMMARY_KEYS if column not in table.columns]
    if missing:
        return None, f"is not a ppgbench summary (no column {', '.join(missing)})"
    means = pd.to_numeric(table["mean"], errors="coerce")
    bad = table.index[means.isna() & table["mean"].notna()]
    if len(bad):
        return None, f"row {int(bad[0]) + 2}: mean {table['mean'][bad[0]]!r} is not a number"
    return table, ""


class Results:
    """A run folder's summary, jobs, predictions and report; ``run``: what :func:`evaluate` did (else None)."""

    def __init__(self, run_dir: str | Path, run: RunReport | None = None) -> None:  # noqa: D107
        self.run_dir = Path(run_dir)
        self.run = run

    def __repr__(self) -> str:  # noqa: D105
        return f"{type(self).__name__}({str(self.run_dir)!r})"

    @property
    def failed(self) -> list[str]:
        """``<job id>: <error>`` for every job the last :func:`evaluate` call could not finish."""
        return list(self.run.failed) if self.run is not None else []

    def records(self) -> list[dict[str, Any]]:
        """Every usable job record of the folder in job-id order; others are skipped with a warning naming them."""
        return self._read_warned()[0]

    @property
    def problems(self) -> list[str]:
        """One line per file of the folder that was skipped: ``<path>: <what is wrong>``."""
        from ppgbench_pl.results.summary import SUMMARY_FILE

        problems = self._read()[2]
        path = self.run_dir / SUMMARY_FILE
        if path.exists() and (why := read_summary(path)[1]):
            problems.append(f"{path}: {why}")
        return problems

    def _read_warned(self) -> tuple[list[dict[str, Any]], list[FoldEntry | str]]:
        records, entries, problems = self._read()
        for problem in problems:
            warnings.warn(f"skipped {problem}", stacklevel=3)
        return records, entries

    def _read(self) -> tuple[list[dict[str, Any]], list[FoldEntry | str], list[str]]:
        """(usable records, what :func:`entry_or_id` makes of each, one line per skipped file)."""
        from ppgbench_pl.results.fold_entry import MalformedRecord, entry_or_id
        from ppgbench_pl.results.records import RESULTS_FILE, scan_records

        scan = scan_records(self.run_dir)
        records, entries, problems = [], [], list(scan.problems)
        for record, folder in zip(scan.records, scan.folders, strict=True):
            why = foreign_record(record, folder)
            if why is None:
                try:
                    entries.append(entry_or_id(record))
                    records.append(record)
                    continue
                except MalformedRecord as exc:
                    why = str(exc)
            problems.append(f"{folder / RESULTS_FILE}: {why}")
        return records, entries, problems

    @property
    def summary(self) -> pd.DataFrame:
        """``summary.csv`` (mean and 95 % CI per model, task, regime), recomputed from the records if it is damaged."""
        from ppgbench_pl.results.summary import SUMMARY_FILE, SummaryBook

        entries = self._read_warned()[1]
        path = self.run_dir / SUMMARY_FILE
        if path.exists():
            table, why = read_summary(path)
            if table is not None:
                return table
            warnings.warn(f"{path}: {why}; the summary is recomputed from the job records", stacklevel=2)
        book = SummaryBook()
        for entry in entries:
            book.take(entry)
        return book.summary()

    @property
    def jobs(self) -> pd.DataFrame:
        """One row per job: its value (mean over repeats), baseline, the first repeat's metrics and params."""
        import pandas as pd

        rows = []
        for record in self.records():
            metric = record.get("metric")
            results = record.get("results") or []
            values = [r.get("metrics", {}).get(metric) for r in results]
            values = [float(v) for v in values if isinstance(v, int | float)]
            first = results[0] if results else {}
            params = dict(first.get("params") or {})
            row = {k: record.get(k) for k in JOB_COLUMNS}
            row.update({"value": sum(values) / len(values) if values else None,
                        "baseline": (record.get("baseline") or {}).get(metric),
                        "metrics": dict(first.get("metrics") or {}), "params": params, "n_repeats": len(results)})
            rows.append(row | {f"param.{k}": v for k, v in params.items()})
        return pd.DataFrame(rows, columns=list(dict.fromkeys([*JOB_COLUMNS, *(k for r in rows for k in r)])))

    def predictions(self, job_id: str | int, repeat: int = 0) -> dict[str, np.ndarray]:
        """A job's arrays of one repeat; ``job_id``: an id, a unique suffix or a row of :attr:`jobs` (DataError)."""
        import zipfile

        import numpy as np

        from ppgbench_pl.results.packed_arrays import check_siblings
        from ppgbench_pl.results.records import job_dir

        jid, which = self._job_of(job_id)
        path = job_dir(self.run_dir, jid) / f"predictions_repeat{repeat}.npz"
        if not path.exists():
            raise DataError(f"{path}: {which} saved no predictions for repeat {repeat}")
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise DataError(f"{path}: {which}: the predictions file is damaged or truncated "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
        try:
            check_siblings({k: v.shape for k, v in arrays.items()})  # one row per window in every array
        except ValueError as exc:
            raise DataError(f"{path}: {which}: {exc}") from None
        return arrays

    def _job_of(self, job: str | int) -> tuple[str, str]:
        """(job id, how to name it) for a job id, a unique suffix or a row index of :attr:`jobs`."""
        if isinstance(job, str):
            ids = self._job_ids()
            matches = [job] if job in ids else sorted(i for i in ids if i.endswith(job))
            if len(matches) == 1:
                return matches[0], f"job {matches[0]}"
            if not matches:
                raise DataError(f"{self.run_dir}: no job {job!r} (Results.jobs lists the job ids)")
            raise DataError(f"{self.run_dir}: {job!r} matches {len(matches)} jobs "
                            f"({', '.join(matches[:3])}, ...); give the full job id")
        if isinstance(job, bool) or not isinstance(job, numbers.Integral):
            raise DataError(f"predictions({job!r}): give a job id (Results.jobs.job_id) or a row index of "
                            f"Results.jobs, not a {type(job).__name__}")
        ids = [str(r["job_id"]) for r in self._read()[0]]  # the rows of .jobs, in order
        if not -len(ids) <= int(job) < len(ids):
            rows = f"rows 0-{len(ids) - 1}" if ids else "no rows"
            raise DataError(f"{self.run_dir}: predictions({int(job)}): Results.jobs has {rows}")
        jid = ids[int(job)]
        return jid, f"Results.jobs row {int(job)} (job {jid})"

    def _job_ids(self) -> list[str]:
        """Ids a job id or suffix is looked up in: the job folders."""
        from ppgbench_pl.results.records import job_folders

        return job_folders(self.run_dir) if (self.run_dir / "jobs").is_dir() else []

    def report(self, output_dir: str | Path, **options: Any) -> Path:
        """Build the report of this run (``ppgbench report``; ``build_report`` options); its ``index.html``."""
        from ppgbench_pl.report import build_report

        return build_report([self.run_dir], output_dir, **options)


class ExportedResults(Results):
    """A :class:`Results` of one file from ``ppgbench export`` (``DataError``: unreadable)."""

    def __init__(self, path: str | Path) -> None:  # noqa: D107
        from ppgbench_pl.results.fold_entry import entry_or_id
        from ppgbench_pl.results.untrusted import read_results_file

        super().__init__(path)
        self.document: dict[str, Any] = read_results_file(path)
        self._records = list(self.document["records"])  # checked once, when opened: nothing is skipped
        self._items = [entry_or_id(r) for r in self._records]  # a file does not change: converted once

    @property
    def model_card(self) -> dict[str, Any]:
        """The model card the file carries."""
        return dict(self.document.get("model_card") or {})

    def predictions(self, job_id: str | int, repeat: int = 0) -> dict[str, np.ndarray]:
        """The arrays a job saved for one repeat, as :meth:`Results.predictions` (format version 2 files only)."""
        from ppgbench_pl.results.packed_arrays import unpack_all

        jid, which = self._job_of(job_id)
        carried = self.document.get("predictions")
        if carried is None:
            raise DataError(f"{self.run_dir}: an exported file of format version 1 carries no predictions; "
                            f"open the run folder {self.document.get('run', {}).get('source', '')} for {which}")
        name = f"predictions_repeat{repeat}.npz"
        packed = (carried.get(jid) or {}).get(name)
        if packed is None:
            raise DataError(f"{self.run_dir}: {which} saved no predictions for repeat {repeat}")
        try:
            return unpack_all(packed)
        except ValueError as exc:
            raise DataError(f"{self.run_dir}: {which} {name}: {exc}") from None

    def _read(self) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
        return list(self._records), list(self._items), []

    def _job_ids(self) -> list[str]:
        """The exported records' ids (there are no job folders)."""
        return [str(r.get("job_id")) for r in self.records()]


def load_run(path: str | Path) -> Results:
    """Open a run folder, partial or complete, or a file from ``ppgbench export`` (``DataError``: one line)."""
    run_dir = Path(path)
    if run_dir.is_file():
        return ExportedResults(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: no such run folder")
    if not (run_dir / "run.json").exists() and not (run_dir / "jobs").is_dir():
        raise DataError(f"{run_dir}: not a run folder (no run.json and no jobs/); give a run's output_dir")
    return Results(run_dir)
