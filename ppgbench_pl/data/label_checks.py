"""Label values checked against their task before anything is computed: classes and plausible ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
    values = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    if task.kind == "classification":
        _check_classes(where, task, values.reshape(-1))
    elif task.kind == "regression" and task.unit in PLAUSIBLE:
        low, high = PLAUSIBLE[task.unit]
        finite = values[np.isfinite(values)]
        bad = finite[(finite < low) | (finite > high)]
        if bad.size or np.isinf(values).any():
            value = bad[0] if bad.size else values[np.isinf(values)][0]
            raise DataError(f"{where}: label {value:g} {task.unit} is outside {low:g}-{high:g} {task.unit} "
                            "(NaN marks a window without a label)")


def _check_classes(where: str, task: TaskSpec, values: np.ndarray) -> None:
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
