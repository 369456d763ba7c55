"""From a processed tree to what a task evaluates (PROTOCOL.md 1.11), its labels checked against the task first."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.errors import DataError

#: Values a regression target of each unit can physically take (inclusive); wide on purpose: they catch
#: unit mix-ups and corrupt files, not unusual subjects.
PLAUSIBLE: dict[str, tuple[float, float]] = {
    "bpm": (10.0, 400.0), "breaths/min": (0.0, 150.0), "%": (0.0, 100.0), "years": (0.0, 150.0),
    "SAM 1-9": (1.0, 9.0), "mmHg": (0.0, 400.0), "mmol/l": (0.0, 100.0), "kg/m^2": (5.0, 150.0),
}


def check_labels(path: Path, subject: str, task: TaskSpec, y: np.ndarray) -> None:
    """Refuse labels a task cannot hold: a class index or -1; a regression value inside :data:`PLAUSIBLE` or NaN."""
    where = f"{path}: subject {subject}: task {task.name}"
    if not np.issubdtype(y.dtype, np.number) and y.dtype != np.bool_:
        raise DataError(f"{where}: labels are {y.dtype} values, not numbers")
    values: np.ndarray = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    if task.kind == "classification":
        values = values.reshape(-1)
        if not np.isfinite(values).all():
            raise DataError(f"{where}: a class label is NaN/inf (use -1 for a window without a label)")
        fractional = values[values != np.round(values)]
        if fractional.size:
            raise DataError(f"{where}: class label {fractional[0]:g} is not an integer")
        n = len(task.classes)
        bad = values[(values < -1) | ((values >= n) if n else False)]
        if bad.size:
            allowed = f"0-{n - 1} ({', '.join(task.classes)})" if n else "integers >= 0"
            raise DataError(f"{where}: label {bad[0]:g} is not a class of the task (classes {allowed}; -1 marks "
                            "a window without a label)")
    elif task.kind == "regression" and task.unit in PLAUSIBLE:
        low, high = PLAUSIBLE[task.unit]
        finite = values[np.isfinite(values)]
        bad = finite[(finite < low) | (finite > high)]
        if bad.size or np.isinf(values).any():
            value = bad[0] if bad.size else values[np.isinf(values)][0]
            raise DataError(f"{where}: label {value:g} {task.unit} is outside {low:g}-{high:g} {task.unit} "
                            "(NaN marks a window without a label)")


@dataclass
class DatasetWindows:
    """Every window of one processed dataset, concatenated in sorted-group order."""

    directory: str
    x: np.ndarray
    groups: np.ndarray
    ppg_mean: np.ndarray
    ppg_std: np.ndarray
    group_names: list[str]

    _digest: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def n_samples(self) -> int:
        """Window length in samples."""
        return int(self.x.shape[1])

    def content_digest(self) -> str:
        """SHA-256 of what an encoder sees (windows, groups, stats): the embedding cache's key, computed once."""
        if self._digest is None:
            digest = hashlib.sha256()
            x = np.ascontiguousarray(self.x, dtype=np.float32)
            digest.update(f"float32 {x.shape}\n".encode())
            digest.update(x.data)  # the buffer itself, no copy
            digest.update("\n".join(self.group_names).encode() + b"\n")
            names, first, counts = np.unique(self.groups, return_index=True, return_counts=True)
            for name, start, count in zip(names.tolist(), first.tolist(), counts.tolist(), strict=True):
                digest.update(f"{name}\t{start}\t{count}\n".encode())
            digest.update(np.ascontiguousarray(self.ppg_mean, dtype=np.float32).tobytes())
            digest.update(np.ascontiguousarray(self.ppg_std, dtype=np.float32).tobytes())
            self._digest = digest.hexdigest()
        return self._digest


def load_windows(store: ProcessedDataset) -> DatasetWindows:
    """Read every group's ``ppg.npy`` and stats; all windows must share one length."""
    names = store.groups
    if not names:
        raise DataError(f"{store.directory}: no group folder with ppg.npy")
    xs, groups, means, stds = [], [], [], []
    for name in names:
        ppg = store.ppg(name)
        stats = store.stats(name)
        xs.append(ppg)
        groups.extend([name] * len(ppg))
        means.append(np.full(len(ppg), float(stats["ppg_mean"]), dtype=np.float32))
        stds.append(np.full(len(ppg), float(stats["ppg_std"]), dtype=np.float32))
    lengths = {x.shape[1] for x in xs}
    if len(lengths) != 1:
        raise DataError(f"{store.directory}: groups have different window lengths {sorted(lengths)}")
    return DatasetWindows(
        directory=str(store.directory),
        x=np.concatenate(xs),
        groups=np.asarray(groups, dtype=str),
        ppg_mean=np.concatenate(means),
        ppg_std=np.concatenate(stds),
        group_names=names,
    )


@dataclass
class TaskView:
    """The valid rows of one task: indices into :class:`DatasetWindows`, targets and groups."""

    task: TaskSpec
    rows: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    all_groups: list[str]

    def __len__(self) -> int:
        return len(self.rows)


def load_task(store: ProcessedDataset, windows: DatasetWindows, task: TaskSpec) -> TaskView:
    """Targets and validity mask of one task over all windows (classification: -1 invalid; regression: NaN)."""
    rows, ys = [], []
    offset = 0
    for name in windows.group_names:
        n = int((windows.groups == name).sum())
        y = store.target(name, task.target, n_windows=n)
        check_labels(store.directory / name / f"{task.target}.npy", name, task, y)
        if task.kind == "classification":
            y = y.astype(np.int64)
            valid = y != -1
        elif task.kind == "regression_cls":
            y = y.astype(np.float32).reshape(n, -1)
            valid = np.isfinite(y).all(axis=1)
            flag = store.directory / name / "has_video_label.npy"
            if flag.exists():
                valid &= store.target(name, "has_video_label", n_windows=n).astype(bool)
        else:
            y = y.astype(np.float32)
            valid = np.isfinite(y)
        idx = np.flatnonzero(valid)
        if task.level == "subject" and len(idx) and len(np.unique(y[idx], axis=0)) > 1:
            raise DataError(f"{store.directory / name}: subject-level task {task.name} has mixed labels")
        rows.append(idx + offset)
        ys.append(y[idx])
        offset += n
    all_rows = np.concatenate(rows)
    if len(all_rows) == 0:
        raise DataError(f"{store.directory}: task {task.name} has no valid label in any group")
    return TaskView(
        task=task,
        rows=all_rows,
        y=np.concatenate(ys),
        groups=windows.groups[all_rows],
        all_groups=list(windows.group_names),
    )
