"""Keep a :class:`~ppgbench_pl.results.summary.SummaryBook` equal to the records on disk of one run folder.

Commands writing into one folder each rewrite ``summary.csv`` and ``status.json`` from the disk under the summary
lock. An ``ok`` record counts only when the summary can use it and its prediction files are readable.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppgbench_pl.results.fold_entry import FoldEntry, MalformedRecord, entry_or_id, fold_entry
from ppgbench_pl.results.records import RESULTS_FILE, job_folders, read_record_file
from ppgbench_pl.results.summary import SummaryBook

#: The status of a job whose outer fold cannot be evaluated (known from the data, so it is not trained).
NOT_EVALUABLE = "not_evaluable"


def summary_lock_path(run_dir: str | Path) -> Path:
    """The lock every rewrite of a folder's ``summary.csv`` and ``status.json`` takes (beside the job locks)."""
    return Path(run_dir) / ".locks" / "summary.lock"


def record_files_problem(folder: Path, record: Mapping[str, Any], deep: bool = True) -> str | None:
    """Why an ``ok`` record's job folder is not complete (``<file>: <what>``), or None; ``deep`` checks CRCs."""
    results = record.get("results")
    names = [r.get("predictions") for r in results if isinstance(r, Mapping)] if isinstance(results, list) else []
    for name in (n for n in names if isinstance(n, str) and n):
        path = folder / name
        if os.sep in name or name.startswith(".."):
            return f"{path}: names a file outside its job folder"
        if not path.is_file():
            return f"{path}: predictions file missing"
        if not deep:
            continue
        try:
            with zipfile.ZipFile(path) as archive:
                if not archive.namelist() or archive.testzip() is not None:
                    return f"{path}: predictions file damaged"
        except (OSError, zipfile.BadZipFile, EOFError, ValueError):
            return f"{path}: is not a readable .npz file (truncated?)"
    return None


class FolderSync:
    """What a :class:`SummaryBook` holds of a run folder, re-reading only records whose size or mtime changed."""

    def __init__(self, book: SummaryBook, run_dir: str | Path) -> None:  # noqa: D107
        self.book, self.run_dir = book, Path(run_dir)
        self._seen: dict[str, tuple[int, int]] = {}
        self.incomplete: dict[str, str] = {}  # job id -> why its ok record does not count
        self.not_evaluable: set[str] = set()  # jobs recorded as not evaluable (settled, not failed)

    def sync(self, deep: bool = False) -> list[str]:
        """Re-read the records changed since the last call (``deep``: check prediction files); one line per unusable."""
        try:
            names = job_folders(self.run_dir)
        except NotADirectoryError:
            return [f"{self.run_dir / 'jobs'}: is not a folder"]
        for gone in set(self._seen) - set(names):
            self._forget(gone)
        return [problem for problem in (self._update(name, deep) for name in names) if problem]

    def _forget(self, name: str, stamp: tuple[int, int] | None = None) -> None:
        self._seen.pop(name, None)
        self.incomplete.pop(name, None)
        self.not_evaluable.discard(name)
        self.book.forget(name)
        if stamp is not None:
            self._seen[name] = stamp  # not re-read until it changes

    def _update(self, name: str, deep: bool) -> str | None:
        path = self.run_dir / "jobs" / name / RESULTS_FILE
        try:
            st = path.stat()
        except OSError:
            self._forget(name)  # a final folder without its record (a crash mid-rename): the job reruns
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        if self._seen.get(name) == stamp and not (deep and name not in self.incomplete):
            return None
        self._seen[name] = stamp
        try:
            record = read_record_file(path)
            item = entry_or_id(record)
        except (ValueError, MalformedRecord) as exc:
            self._forget(name, stamp)
            return f"{path}: {exc}"
        if record.get("status") == NOT_EVALUABLE:
            self.book.forget(name)
            self.not_evaluable.add(name)
        elif isinstance(item, FoldEntry) and (problem := record_files_problem(path.parent, record, deep)):
            self._forget(name, stamp)
            self.incomplete[name] = problem
            return problem
        else:
            self.incomplete.pop(name, None)
            self.book.take(item)  # an entry, or the id of a job whose record is not ok ('' takes nothing)
        return None


def folder_status(sync: FolderSync, planned: set[str], failed_here: set[str]) -> dict[str, Any]:
    """``status.json``'s counts against every plan that wrote into the folder; a not-evaluable job is settled."""
    book = sync.book
    ok = book.ok_ids & planned
    settled = sync.not_evaluable & planned
    failed = ((book.failed_ids | failed_here) & planned) - ok - settled
    return {"completed": len(ok), "failed": len(failed), "not_evaluable": len(settled), "planned": len(planned),
            "complete": len(ok) + len(settled) == len(planned) and (bool(ok) or not planned),
            "records_in_folder": len(book)}


def read_record_complete(run_dir: str | Path, jid: str) -> dict[str, Any] | None:
    """A job's ``ok`` record when the summary can use it and its folder is complete, else None (it reruns)."""
    folder = Path(run_dir) / "jobs" / jid
    try:
        record = read_record_file(folder / RESULTS_FILE)
        entry = fold_entry(record)
    except ValueError:  # MalformedRecord included
        return None
    return record if entry is not None and record_files_problem(folder, record) is None else None


def merged_extras(run_dir: str | Path, extra: dict[str, Any], tasks: set[str], jobs: set[str]) -> dict[str, Any]:
    """``status.json``'s skipped tasks and not-evaluable jobs of the folder (an earlier command's unless redone)."""
    try:
        previous = json.loads((Path(run_dir) / "status.json").read_text())
    except (OSError, ValueError):
        previous = {}
    merged = dict(extra)
    for key, looked_at in (("skipped_tasks", tasks), ("not_evaluable_jobs", jobs)):
        kept = {k: v for k, v in (previous.get(key) or {}).items() if k not in looked_at}
        if combined := {**kept, **(extra.get(key) or {})}:
            merged[key] = dict(sorted(combined.items()))
    return merged
