"""The processed store: one folder per (target rate, dataset), one sub-folder per group.

Layout (PROTOCOL.md section 1.0), shared with trees made by the published protocol's own tooling::

    <root>/fs_<rate>/<DisplayName>/preprocessing.json      marker, written last
    <root>/fs_<rate>/<DisplayName>/<group>/ppg.npy          float32 [n_windows, window_samples]
    <root>/fs_<rate>/<DisplayName>/<group>/<target>.npy     one per label, length n_windows
    <root>/fs_<rate>/<DisplayName>/<group>/stats.json       subject, ppg_mean, ppg_std (+ extras)
    <root>/fs_<rate>/<DisplayName>/<group>/metadata.csv     one row per kept window
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ppgbench_pl.errors import DataError

if TYPE_CHECKING:  # pandas is only named in annotations here; importing it costs ~0.5 s of every start
    import pandas as pd

MARKER = "preprocessing.json"
RAW_SUFFIXES = (".pkl", ".csv", ".mat", ".xlsx", ".txt", ".dat", ".hea")


def dataset_dir(root: str | Path, fs: float, display_name: str) -> Path:
    """``<root>/fs_<rate>/<DisplayName>``, the rate spelled ``64`` for integers, ``62.5`` otherwise."""
    return Path(root) / f"fs_{int(fs) if float(fs).is_integer() else fs}" / display_name


def raw_files_digest(raw_root: Path) -> str:
    """SHA-256 over (relative path, size, mtime in ns) of the raw files: the input identity."""
    digest = hashlib.sha256()
    for path in sorted(p for p in raw_root.rglob("*") if p.is_file() and p.suffix.lower() in RAW_SUFFIXES):
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
    return np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.int64)


def as_regression_target(values: Iterable[Any]) -> np.ndarray:
    """Regression target: float32 with NaN meaning invalid."""
    return np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float32)


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
        """The groups, sorted as strings (the published split order); exactly those the marker lists, if it does."""
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
            raise DataError(f"{self.where(missing[0], 'ppg.npy')} not found, but {MARKER} lists the group{more}; "
                            "restore it or preprocess again")
        extra = sorted(set(on_disk) - set(listed))
        if extra:
            raise DataError(f"{self.where(extra[0], 'ppg.npy')}: group not listed in {MARKER}; remove it "
                            "or preprocess again")
        return sorted(listed)

    def ppg(self, group: str) -> np.ndarray:
        """Windows of one group as float32 ``[n, T]`` (a 1-D file is one window), refused unless finite."""
        path = self.directory / group / "ppg.npy"
        array = _load_npy(path)
        if array.ndim == 1:
            array = array[None, :]
        where = self.where(group, "ppg.npy")
        if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
            raise DataError(f"{where}: expected a non-empty [n_windows, samples] array, got shape {array.shape}")
        if array.dtype.kind != "f":
            raise DataError(f"{where}: expected float windows, got dtype {array.dtype}")
        array = array.astype(np.float32, copy=False)
        finite = np.isfinite(array).all(axis=1)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise DataError(f"{where}: {len(bad)} of {len(array)} windows hold NaN or inf (first: window {bad[0]}); "
                            "preprocess again")
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
                raise DataError(f"{self.where(group, 'stats.json')}: '{key}' is {value!r}, not a finite number")
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
