"""How a metric is named in a table header or an axis label: name, unit (from the task), direction."""

from __future__ import annotations

from ppgbench_pl.results.fold_entry import task_facts

METRIC_NAMES = {"mae": "MAE", "balanced_accuracy": "BA", "argmax_balanced_accuracy": "argmax BA"}
LOWER_IS_BETTER = {"mae"}


def metric_label(metric: str, task: str | None = None, arrow: bool = True) -> str:
    """``MAE (bpm) ↓`` for a task with a unit, ``BA ↑`` without one."""
    _, unit, higher = task_facts(task) if task else ("", "", None)
    if higher is None:
        higher = metric not in LOWER_IS_BETTER
    text = METRIC_NAMES.get(metric, metric) + (f" ({unit})" if unit else "")
    return f"{text} {'↑' if higher else '↓'}" if arrow else text


def unit_of(task: str) -> str:
    """The unit of a task's reported metric ('' for classification and unknown tasks)."""
    return task_facts(task)[1]
