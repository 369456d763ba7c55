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
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.errors import DataError

MARKER = "preprocessing.json"
RAW_SUFFIXES = (".pkl", ".csv", ".mat", ".xlsx", ".txt", ".dat", ".hea")


def format_fs(fs: float) -> str:
    """Folder spelling of a rate: ``64`` for integers, ``62.5`` otherwise."""
    return str(int(fs)) if float(fs).is_integer() else str(fs)


def dataset_dir(root: str | Path, fs: float, display_name: str) -> Path:
    """``<root>/fs_<rate>/<DisplayName>``."""
    return Path(root) / f"fs_{format_fs(fs)}" / display_name


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON through a temporary file and ``os.replace`` so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(_json_safe(payload), handle, indent=2, sort_keys=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_safe(value: Any) -> Any:
    """Numpy scalars to Python, non-finite floats to null (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


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
        if self.metadata is not None and len(self.metadata) != n:
            raise DataError(f"group {self.name}: metadata has {len(self.metadata)} rows for {n} windows")


def as_class_target(values: Iterable[Any]) -> np.ndarray:
    """Classification target: int64 with -1 meaning invalid."""
    return np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.int64)


def as_regression_target(values: Iterable[Any]) -> np.ndarray:
    """Regression target: float32 with NaN meaning invalid."""
    return np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float32)


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
        (folder / "stats.json").write_text(json.dumps(_json_safe(group.stats), indent=2))
        if group.metadata is not None:
            group.metadata.to_csv(folder / "metadata.csv", index=False)
        self.groups.append(group.name)


class MarkerMismatch(DataError):
    """The output folder exists but was made from other inputs or settings."""


def check_existing(final_dir: Path, marker: Mapping[str, Any]) -> bool:
    """True when ``final_dir`` is already built with this exact marker; error when it holds something else."""
    if not final_dir.exists():
        return False
    marker_path = final_dir / MARKER
    if not marker_path.exists():
        raise MarkerMismatch(f"{final_dir}: folder exists without {MARKER}; refusing to overwrite it")
    existing = json.loads(marker_path.read_text())
    existing.pop("groups", None)  # added by the writer, not part of the identity
    if existing != _json_safe(dict(marker)):
        changed = sorted(k for k in set(existing) | set(marker) if existing.get(k) != _json_safe(marker.get(k)))
        raise MarkerMismatch(
            f"{marker_path}: made from other inputs or settings ({', '.join(changed)} differ); "
            "choose another output folder or remove it"
        )
    return True


@contextmanager
def open_writer(final_dir: Path, marker: Mapping[str, Any]) -> Iterator[ProcessedWriter]:
    """Context manager that builds a tree in a temporary sibling and renames it into place on success."""
    created = [p for p in (final_dir.parent, *final_dir.parent.parents) if not p.exists()]  # deepest first
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix=f".{final_dir.name}.building-", dir=final_dir.parent))
    writer = ProcessedWriter(final_dir=final_dir, marker=dict(marker), work_dir=work_dir)
    try:
        yield writer
        if not writer.groups:
            raise DataError(f"{final_dir}: no group produced any window")
        write_json_atomic(work_dir / MARKER, {**writer.marker, "groups": sorted(writer.groups)})
        os.replace(work_dir, final_dir)
    finally:
        if work_dir.exists():
            shutil.rmtree(work_dir, ignore_errors=True)
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
    def groups(self) -> list[str]:
        """Group folders that hold ``ppg.npy``, sorted as strings (the published split order)."""
        return sorted(p.parent.name for p in self.directory.glob("*/ppg.npy"))

    def ppg(self, group: str) -> np.ndarray:
        """Windows of one group as float32 ``[n, T]`` (a 1-D file is one window)."""
        path = self.directory / group / "ppg.npy"
        array = _load_npy(path)
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2:
            raise DataError(f"{path}: expected a [n_windows, samples] array, got shape {array.shape}")
        return array.astype(np.float32, copy=False)

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
        for key in ("ppg_mean", "ppg_std"):
            if key not in stats:
                raise DataError(f"{path}: lacks '{key}'")
        return stats

    def marker(self) -> dict[str, Any] | None:
        """The preprocessing marker, if present."""
        path = self.directory / MARKER
        return json.loads(path.read_text()) if path.exists() else None


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{path}: unreadable .npy file ({exc})") from None
