"""The processed store: one folder per (target rate, dataset), one sub-folder per group.

Layout (PROTOCOL.md section 1.0), shared by the synthetic dataset, the nine real datasets and trees made
by the published protocol's own tooling::

    <root>/fs_<rate>/<DisplayName>/preprocessing.json      marker, written last
    <root>/fs_<rate>/<DisplayName>/<group>/ppg.npy          float32 [n_windows, window_samples]
    <root>/fs_<rate>/<DisplayName>/<group>/<target>.npy     one per label, length n_windows
    <root>/fs_<rate>/<DisplayName>/<group>/stats.json       subject, ppg_mean, ppg_std (+ extras)
    <root>/fs_<rate>/<DisplayName>/<group>/metadata.csv     one row per kept window

Writing is all-or-nothing: a tree is built in a hidden temporary sibling and renamed into place, with the
marker written last, so an interrupted or failed build never leaves a half-written dataset behind.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from ppgbench_pl.atomic_io import (
    dir_mode,
    json_safe,
    write_json_atomic,
)
from ppgbench_pl.errors import DataError

if TYPE_CHECKING:  # pandas is only named in annotations here; importing it costs ~0.5 s of every start
    import pandas as pd

MARKER = "preprocessing.json"
RAW_SUFFIXES = (".pkl", ".csv", ".mat", ".xlsx", ".txt", ".dat", ".hea")


def format_fs(fs: float) -> str:
    """Folder spelling of a rate: ``64`` for integers, ``62.5`` otherwise."""
    return str(int(fs)) if float(fs).is_integer() else str(fs)


def dataset_dir(root: str | Path, fs: float, display_name: str) -> Path:
    """``<root>/fs_<rate>/<DisplayName>``."""
    return Path(root) / f"fs_{format_fs(fs)}" / display_name


def raw_files_digest(raw_root: Path, suffixes: Iterable[str] = RAW_SUFFIXES) -> str:
    """SHA-256 over (relative path, size, mtime in ns) of the raw files: the input identity."""
    digest = hashlib.sha256()
    for path in sorted(p for p in raw_root.rglob("*") if p.is_file() and p.suffix.lower() in suffixes):
        info = path.stat()
        digest.update(f"{path.relative_to(raw_root).as_posix()}\t{info.st_size}\t{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def source_digest(*paths: str | Path) -> str:
    """SHA-256 of the preprocessing source files, so a code change invalidates old trees."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


@dataclass
class GroupData:
    """Everything stored for one group: windows, targets, statistics and per-window metadata."""

    name: str
    ppg: np.ndarray
    targets: dict[str, np.ndarray]
    stats: dict[str, Any]
    metadata: pd.DataFrame | None = None
    #: Arrays saved as ``<name>.npy`` that need not line up with the windows (ECSMP ``reject_idx``).
    extra_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    #: Windows rejected before these were kept, per reason (``{"non_finite": 1, "flat": 3}``); for the marker.
    dropped: dict[str, int] = field(default_factory=dict)

    def validate(self) -> None:
        """Check shapes and dtypes before anything is written."""
        if self.ppg.ndim != 2 or self.ppg.shape[0] == 0:
            raise DataError(f"group {self.name}: ppg must be a non-empty [n_windows, samples] array")
        n = self.ppg.shape[0]
        for key, values in self.targets.items():
            if len(values) != n:
                raise DataError(f"group {self.name}: target '{key}' has {len(values)} rows for {n} windows")
        clashes = sorted(set(self.extra_arrays) & (set(self.targets) | {"ppg"}))
        if clashes:
            raise DataError(f"group {self.name}: extra arrays {clashes} clash with targets or ppg")
        for key in ("subject", "ppg_mean", "ppg_std"):
            if key not in self.stats:
                raise DataError(f"group {self.name}: stats lack '{key}'")
        if not np.isfinite(self.ppg).all():  # the reader refuses such a tree, so never write one
            raise DataError(f"group {self.name}: {int((~np.isfinite(self.ppg).all(axis=1)).sum())} windows "
                            "hold NaN or inf after rejection")
        for key in ("ppg_mean", "ppg_std"):
            value = self.stats[key]
            if not isinstance(value, int | float | np.number) or not math.isfinite(float(value)):
                raise DataError(f"group {self.name}: stats '{key}' is {value!r}, not a finite number")
        if self.metadata is not None and len(self.metadata) != n:
            raise DataError(f"group {self.name}: metadata has {len(self.metadata)} rows for {n} windows")


def as_class_target(values: Iterable[Any]) -> np.ndarray:
    """Classification target: int64 with -1 meaning invalid."""
    return np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.int64)


def as_regression_target(values: Iterable[Any]) -> np.ndarray:
    """Regression target: float32 with NaN meaning invalid."""
    return np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float32)


#: Marker keys the writer adds (what was built, not what it was built from); not part of the identity.
WRITER_KEYS = ("groups", "n_windows", "dropped_windows")
#: Hidden build folders are ``.<DisplayName>.building-<unique>`` siblings with a ``.lock`` file beside them.
BUILDING = ".building-"


@dataclass
class ProcessedWriter:
    """Builds one ``fs_<rate>/<DisplayName>`` tree atomically.

    Use :func:`open_writer`; call :meth:`add_group` per group. The tree appears only when the
    ``with`` block finishes without error, and the marker is the last file written.
    """

    final_dir: Path
    marker: dict[str, Any]
    work_dir: Path
    groups: list[str] = field(default_factory=list)
    n_windows: dict[str, int] = field(default_factory=dict)
    #: Windows rejected per group and reason (``{"S1": {"non_finite": 2, "flat": 3}}``), kept in the marker.
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)

    def add_group(self, group: GroupData) -> None:
        """Validate and write one group's files into the temporary tree."""
        group.validate()
        if group.name in self.groups:
            raise DataError(f"group {group.name} written twice")
        folder = self.work_dir / group.name
        folder.mkdir(parents=True)
        np.save(folder / "ppg.npy", np.ascontiguousarray(group.ppg, dtype=np.float32))
        for key, values in {**group.targets, **group.extra_arrays}.items():
            np.save(folder / f"{key}.npy", np.asarray(values))
        (folder / "stats.json").write_text(json.dumps(json_safe(group.stats), indent=2))
        if group.metadata is not None:
            group.metadata.to_csv(folder / "metadata.csv", index=False)
        self.groups.append(group.name)
        self.n_windows[group.name] = int(group.ppg.shape[0])
        self.count_dropped(group.name, group.dropped)

    def count_dropped(self, group: str, counts: Mapping[str, int]) -> None:
        """Add rejected-window counts of one group (a group left out entirely is counted too)."""
        kept = {reason: int(n) for reason, n in counts.items() if int(n) > 0}
        if kept:
            merged = self.dropped.setdefault(group, {})
            for reason, n in kept.items():
                merged[reason] = merged.get(reason, 0) + n

    def final_marker(self) -> dict[str, Any]:
        """Return the marker as written: identity plus what was built and what was dropped."""
        return {
            **self.marker,
            "groups": sorted(self.groups),
            "n_windows": {name: self.n_windows[name] for name in sorted(self.n_windows)},
            "dropped_windows": {name: self.dropped[name] for name in sorted(self.dropped)},
        }


class MarkerMismatch(DataError):
    """The output folder exists but was made from other inputs or settings."""


def read_marker(path: Path) -> dict[str, Any]:
    """Read a marker; an unreadable one is a one-line error naming it."""
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: marker not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: unreadable marker ({exc})") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: marker is not a JSON object")
    return value


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


def _try_lock(handle: IO[Any]) -> bool:
    """Non-blocking exclusive lock; True when taken (its holder, if any, is gone)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: never judge a folder abandoned
        return False
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def clean_abandoned_builds(final_dir: Path, min_age_s: float = 60.0) -> list[Path]:
    """Remove build folders of ``final_dir`` left by a killed process; returns what was removed.

    A build holds a lock on ``<folder>.lock`` while it runs; a folder whose lock can be taken is abandoned.
    A folder without a lock file (made by an older version) counts as abandoned once ``min_age_s`` old.
    """
    import time

    removed: list[Path] = []
    parent = final_dir.parent
    if not parent.is_dir():
        return removed
    for folder in sorted(parent.glob(f".{final_dir.name}{BUILDING}*")):
        if folder.suffix == ".lock" or not folder.is_dir():
            continue
        lock = folder.with_name(folder.name + ".lock")
        if lock.exists():
            try:
                with open(lock, "a") as handle:
                    if not _try_lock(handle):
                        continue
                    shutil.rmtree(folder, ignore_errors=True)
                    lock.unlink(missing_ok=True)
            except OSError:
                continue
        else:
            try:
                age = time.time() - folder.stat().st_mtime
            except OSError:
                continue
            if age < min_age_s:
                continue
            shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    for lock in parent.glob(f".{final_dir.name}{BUILDING}*.lock"):  # locks whose folder is gone
        if not lock.with_suffix("").exists():
            try:
                with open(lock, "a") as handle:
                    if _try_lock(handle):
                        lock.unlink(missing_ok=True)
            except OSError:
                pass
    return removed


@contextmanager
def open_writer(final_dir: Path, marker: Mapping[str, Any]) -> Iterator[ProcessedWriter]:
    """Context manager that builds a tree in a unique temporary sibling and renames it into place.

    Two processes may build the same tree at once: the one that renames second finds the tree there and,
    when its marker is this marker, treats it as built (a no-op); another marker is a ``MarkerMismatch``.
    Build folders left by a killed process are removed first.
    """
    created = [p for p in (final_dir.parent, *final_dir.parent.parents) if not p.exists()]  # deepest first
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    clean_abandoned_builds(final_dir)
    prefix = f".{final_dir.name}{BUILDING}{os.getpid()}-"
    work_dir = Path(tempfile.mkdtemp(prefix=prefix, dir=final_dir.parent))
    lock_path = work_dir.with_name(work_dir.name + ".lock")
    lock = open(lock_path, "w")  # noqa: SIM115 - held for the whole build, closed in finally
    _try_lock(lock)
    writer = ProcessedWriter(final_dir=final_dir, marker=dict(marker), work_dir=work_dir)
    try:
        yield writer
        if not writer.groups:
            raise DataError(f"{final_dir}: no group produced any window")
        write_json_atomic(work_dir / MARKER, writer.final_marker())
        for folder in (work_dir, *(p for p in work_dir.iterdir() if p.is_dir())):
            os.chmod(folder, dir_mode())  # mkdtemp makes 0700; the tree is for everyone the umask allows
        try:
            os.replace(work_dir, final_dir)
        except OSError:
            if not final_dir.exists():
                raise
            check_existing(final_dir, marker)  # another process built it: fine when identical, else an error
    finally:
        if work_dir.exists():
            shutil.rmtree(work_dir, ignore_errors=True)
        lock_path.unlink(missing_ok=True)
        lock.close()
        if not final_dir.exists():  # a failed build leaves no empty fs_<rate>/ folder it made itself
            for folder in created:
                try:
                    folder.rmdir()
                except OSError:
                    break


class ProcessedDataset:
    """Read access to one ``fs_<rate>/<DisplayName>`` tree (ours or the published tooling's)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise DataError(f"{self.directory}: processed dataset folder not found")

    @property
    def name(self) -> str:
        """The dataset's display name (the folder's name)."""
        return self.directory.name

    def where(self, group: str, file: str) -> str:
        """Message prefix naming dataset, group and file."""
        return f"dataset {self.name}, group {group}: {self.directory / group / file}"

    @property
    def groups(self) -> list[str]:
        """The groups, sorted as strings (the published split order).

        When the marker lists its groups (our trees do) the tree must hold exactly those: a listed group
        without ``ppg.npy`` or an unlisted one with it is an error, never a silently smaller dataset.
        Trees without a list (the published tooling's) are read from the ``*/ppg.npy`` files.
        """
        on_disk = sorted(p.parent.name for p in self.directory.glob("*/ppg.npy"))
        marker = self.marker()
        listed = marker.get("groups") if marker else None
        if listed is None:
            return on_disk
        if not isinstance(listed, list) or not all(isinstance(g, str) for g in listed):
            raise DataError(f"{self.directory / MARKER}: 'groups' is not a list of group names")
        missing = sorted(set(listed) - set(on_disk))
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise DataError(
                f"{self.where(missing[0], 'ppg.npy')} not found, but {MARKER} lists the group{more}; "
                "restore it or preprocess again"
            )
        extra = sorted(set(on_disk) - set(listed))
        if extra:
            raise DataError(f"{self.where(extra[0], 'ppg.npy')}: group not listed in {MARKER}; remove it "
                            "or preprocess again")
        return sorted(listed)

    def ppg(self, group: str) -> np.ndarray:
        """Windows of one group as float32 ``[n, T]`` (a 1-D file is one window), checked finite.

        Non-finite windows would become "ok" jobs with empty metrics, so they are refused here.
        """
        path = self.directory / group / "ppg.npy"
        array = _load_npy(path)
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
            raise DataError(f"{self.where(group, 'ppg.npy')}: expected a non-empty [n_windows, samples] "
                            f"array, got shape {array.shape}")
        if array.dtype.kind != "f":
            where = self.where(group, "ppg.npy")
            raise DataError(f"{where}: expected float windows, got dtype {array.dtype}")
        array = array.astype(np.float32, copy=False)
        finite = np.isfinite(array).all(axis=1)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise DataError(
                f"{self.where(group, 'ppg.npy')}: {len(bad)} of {len(array)} windows hold NaN or inf "
                f"(first: window {bad[0]}); preprocess again"
            )
        return array

    def target(self, group: str, name: str, n_windows: int | None = None) -> np.ndarray:
        """One target array of one group; its length must equal the window count."""
        path = self.directory / group / f"{name}.npy"
        if not path.exists():
            raise DataError(f"{path}: target file not found")
        values = _load_npy(path)
        if n_windows is not None and len(values) != n_windows:
            raise DataError(f"{path}: {len(values)} labels for {n_windows} windows in ppg.npy")
        return values

    def stats(self, group: str) -> dict[str, Any]:
        """The group's stats.json (``ppg_mean``/``ppg_std`` at least)."""
        path = self.directory / group / "stats.json"
        try:
            stats = json.loads(path.read_text())
        except FileNotFoundError:
            raise DataError(f"{path}: stats file not found") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: not valid JSON ({exc.msg})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: unreadable stats file ({exc})") from None
        if not isinstance(stats, dict):
            raise DataError(f"{self.where(group, 'stats.json')}: not a JSON object")
        for key in ("ppg_mean", "ppg_std"):
            if key not in stats:
                raise DataError(f"{path}: lacks '{key}'")
            value = stats[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                where = self.where(group, "stats.json")
                raise DataError(f"{where}: '{key}' is {value!r}, not a finite number")
        return stats

    def marker(self) -> dict[str, Any] | None:
        """The preprocessing marker, if present."""
        path = self.directory / MARKER
        return read_marker(path) if path.exists() else None


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{path}: unreadable .npy file ({exc})") from None
