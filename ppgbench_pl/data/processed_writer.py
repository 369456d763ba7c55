"""Building a processed tree all or nothing: in a hidden locked sibling, marker last, then renamed into place."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.atomic_io import dir_mode, json_safe, write_json_atomic
from ppgbench_pl.data.processed import MARKER, GroupData, read_marker
from ppgbench_pl.errors import DataError
from ppgbench_pl.locks import LOCKS_WORK, LockBusy, file_lock

#: Marker keys the writer adds (what was built, not what it was built from); not part of the identity.
WRITER_KEYS = ("groups", "n_windows", "dropped_windows")
#: Hidden build folders are ``.<DisplayName>.building-<unique>`` siblings with a ``.lock`` file beside them.
BUILDING = ".building-"


@dataclass
class ProcessedWriter:
    """Builds one ``fs_<rate>/<DisplayName>`` tree atomically (use :func:`open_writer`, then :meth:`add_group`)."""

    final_dir: Path
    marker: dict[str, Any]
    work_dir: Path
    #: Windows written per group, in writing order.
    n_windows: dict[str, int] = field(default_factory=dict)
    #: Windows rejected per group and reason (``{"S1": {"non_finite": 2, "flat": 3}}``), kept in the marker.
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)

    def add_group(self, group: GroupData) -> None:
        """Validate and write one group's files into the temporary tree."""
        group.validate()
        if group.name in self.n_windows:
            raise DataError(f"group {group.name} written twice")
        folder = self.work_dir / group.name
        folder.mkdir(parents=True)
        np.save(folder / "ppg.npy", np.ascontiguousarray(group.ppg, dtype=np.float32))
        for key, values in {**group.targets, **group.extra_arrays}.items():
            np.save(folder / f"{key}.npy", np.asarray(values))
        (folder / "stats.json").write_text(json.dumps(json_safe(group.stats), indent=2))
        if group.metadata is not None:
            group.metadata.to_csv(folder / "metadata.csv", index=False)
        self.n_windows[group.name] = int(group.ppg.shape[0])
        self.count_dropped(group.name, group.dropped)

    def count_dropped(self, group: str, counts: Mapping[str, int]) -> None:
        """Add rejected-window counts of one group (a group left out entirely is counted too)."""
        for reason, n in counts.items():
            if int(n) > 0:
                merged = self.dropped.setdefault(group, {})
                merged[reason] = merged.get(reason, 0) + int(n)


class MarkerMismatch(DataError):
    """The output folder exists but was made from other inputs or settings."""


def check_existing(final_dir: Path, marker: Mapping[str, Any]) -> bool:
    """Tell whether ``final_dir`` is built with this exact marker; error when it holds something else."""
    if not final_dir.exists():
        return False
    marker_path = final_dir / MARKER
    if not marker_path.exists():
        raise MarkerMismatch(f"{final_dir}: folder exists without {MARKER}; refusing to overwrite it")
    existing = read_marker(marker_path)
    for key in WRITER_KEYS:  # added by the writer, not part of the identity
        existing.pop(key, None)
    if existing != json_safe(dict(marker)):
        keys = set(existing) | set(marker)
        changed = sorted(k for k in keys if existing.get(k) != json_safe(marker.get(k)))
        raise MarkerMismatch(
            f"{marker_path}: made from other inputs or settings ({', '.join(changed)} differ); "
            "choose another output folder or remove it"
        )
    return True


def _remove_if_free(lock: Path, folder: Path | None = None) -> bool:
    """Remove ``folder`` (if given) and ``lock`` when no process holds the lock; True when removed."""
    try:
        with file_lock(lock, blocking=False):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            lock.unlink(missing_ok=True)
    except (LockBusy, OSError):
        return False
    return True


def clean_abandoned_builds(final_dir: Path, min_age_s: float = 60.0) -> list[Path]:
    """Remove (and return) build folders of ``final_dir`` whose lock is free, or lockless ones ``min_age_s`` old."""
    removed: list[Path] = []
    parent = final_dir.parent  # a missing one globs nothing
    for folder in sorted(parent.glob(f".{final_dir.name}{BUILDING}*")):
        if folder.suffix == ".lock" or not folder.is_dir():
            continue
        lock = folder.with_name(folder.name + ".lock")
        if lock.exists():
            if not LOCKS_WORK or not _remove_if_free(lock, folder):
                continue
        else:
            try:
                if time.time() - folder.stat().st_mtime < min_age_s:
                    continue
            except OSError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    if LOCKS_WORK:
        for lock in parent.glob(f".{final_dir.name}{BUILDING}*.lock"):  # locks whose folder is gone
            if not lock.with_suffix("").exists():
                _remove_if_free(lock)
    return removed


@contextmanager
def open_writer(final_dir: Path, marker: Mapping[str, Any]) -> Iterator[ProcessedWriter]:
    """Build a tree in a unique temporary sibling and rename it into place (a concurrent twin: see :func:`_publish`)."""
    created = [p for p in (final_dir.parent, *final_dir.parent.parents) if not p.exists()]  # deepest first
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    clean_abandoned_builds(final_dir)
    prefix = f".{final_dir.name}{BUILDING}{os.getpid()}-"
    work_dir = Path(tempfile.mkdtemp(prefix=prefix, dir=final_dir.parent))
    lock_path = work_dir.with_name(work_dir.name + ".lock")
    writer = ProcessedWriter(final_dir=final_dir, marker=dict(marker), work_dir=work_dir)
    try:
        with file_lock(lock_path):  # held for the whole build: the folder is not abandoned
            try:
                yield writer
                _publish(writer)
            finally:
                if work_dir.exists():
                    shutil.rmtree(work_dir, ignore_errors=True)
                lock_path.unlink(missing_ok=True)
    finally:
        if not final_dir.exists():  # a failed build leaves no empty fs_<rate>/ folder it made itself
            for folder in created:
                try:
                    folder.rmdir()
                except OSError:
                    break


def _publish(writer: ProcessedWriter) -> None:
    """Write the marker last and rename the tree into place; a twin built first must match (else MarkerMismatch)."""
    final_dir, work_dir = writer.final_dir, writer.work_dir
    if not writer.n_windows:
        raise DataError(f"{final_dir}: no group produced any window")
    built = {  # the identity, plus what was built and what was dropped
        "groups": sorted(writer.n_windows),
        "n_windows": {name: writer.n_windows[name] for name in sorted(writer.n_windows)},
        "dropped_windows": {name: writer.dropped[name] for name in sorted(writer.dropped)},
    }
    write_json_atomic(work_dir / MARKER, {**writer.marker, **built})
    for folder in (work_dir, *(p for p in work_dir.iterdir() if p.is_dir())):
        os.chmod(folder, dir_mode())  # mkdtemp makes 0700; the tree is for everyone the umask allows
    try:
        os.replace(work_dir, final_dir)
    except OSError:
        if not final_dir.exists():
            raise
        check_existing(final_dir, writer.marker)  # another process built it: fine when identical, else an error
