"""How big each task of a plan is, for the cost estimate: read from the processed tree, else assumed.

With the tree in place the sizes are exact: the task view's labelled windows, groups and classes at each
encoder rate (what the real run reads). Without it they come from the dataset's declaration (its published
participant count, :class:`~ppgbench_pl.data.spec.DatasetInfo.subjects`) and :data:`WINDOWS_PER_SUBJECT`, the
approximate windows per subject of the publisher's release at the protocol's windowing; the dry run prints
that they are assumed, and the data caps of a budget (``max_subjects``, ``max_windows_per_subject``) apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppgbench_pl.errors import PPGBenchError

#: Approximate windows per subject of each published release at the protocol's windowing (PROTOCOL.md 1),
#: and the subjects where the declaration states none. From the datasets' own descriptions: BIDMC 8-minute
#: records in 10 s windows; PPG-BP three segments per participant; DaLiA about 2.5 h per participant at a
#: 2 s stride; DREAMT a night (about 8 h) in 10 s windows; WESAD about 100 minutes; the others rough orders
#: of magnitude. Only an estimate uses them, and it says they are assumed.
WINDOWS_PER_SUBJECT: dict[str, int] = {
    "bidmc": 48, "ppgbp": 3, "dalia": 4300, "dreamt": 2800, "wesad": 600, "butppg": 80, "ecsmp": 250,
    "realworldppg": 30, "wildppg": 5000,
}
ASSUMED_SUBJECTS: dict[str, int] = {"butppg": 50, "ecsmp": 89, "realworldppg": 35, "wildppg": 16}


@dataclass(frozen=True)
class TaskSize:
    """Labelled windows, groups and classes of one task at one rate, and where the figures come from."""

    rows: int
    groups: int
    classes: int
    windows: int  # every window of the dataset at that rate (what the embedding pass reads)
    source: str


def tree_size(dm: Any, fs: float, task: Any) -> TaskSize:
    """The task's size read from the processed tree (raises the datamodule's error when it is missing)."""
    import numpy as np

    view = dm.task_view(fs, task)
    classes = len(task.classes) if task.classes else len(np.unique(view.y)) if task.kind == "classification" else 1
    return TaskSize(len(view.rows), len(np.unique(view.groups)), int(classes), len(dm.windows(fs).x),
                    "processed tree")


def published_size(dm: Any, task: Any) -> TaskSize:
    """The task's size from the declaration and :data:`WINDOWS_PER_SUBJECT`, under the datamodule's caps."""
    info = dm.info
    if dm.dataset == "synthetic":
        subjects, per_subject = dm.synthetic.n_subjects, dm.synthetic.windows_per_subject
        source = "the synthetic settings"
    else:
        subjects = info.subjects or ASSUMED_SUBJECTS.get(dm.dataset, 20)
        per_subject = WINDOWS_PER_SUBJECT.get(dm.dataset, 500)
        source = f"assumed: no processed tree, ~{per_subject} windows x {subjects} subjects (published release)"
    if dm.max_subjects is not None:
        subjects = min(subjects, dm.max_subjects)
    if dm.max_windows_per_subject is not None:
        per_subject = min(per_subject, dm.max_windows_per_subject)
    classes = len(task.classes) if task.classes else (subjects if task.kind == "classification" else 1)
    return TaskSize(subjects * per_subject, subjects, max(int(classes), 1), subjects * per_subject, source)


def task_size(dm: Any, fs: float, task: Any, read_tree: bool = True) -> TaskSize:
    """:func:`tree_size` when the tree can be read (and ``read_tree``), else :func:`published_size`."""
    if read_tree:
        try:
            return tree_size(dm, fs, task)
        except PPGBenchError:
            pass
    return published_size(dm, task)
