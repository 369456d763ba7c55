"""The sizes an estimate rests on: each task's, read from the processed tree or assumed, and each embedding's.

Without the tree a task's size comes from the dataset's declared participants and :data:`WINDOWS_PER_SUBJECT`
(the publisher's release at the protocol's windowing), under the budget's data caps; the dry run says so.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ppgbench_pl.benchmark.cost_model import DEFAULT_EMBED_DIM, CostModel, encoder_key
from ppgbench_pl.errors import PPGBenchError

#: Approximate windows per subject of each published release (PROTOCOL.md 1), from the datasets' own
#: descriptions (BIDMC 8-minute records in 10 s windows, DaLiA ~2.5 h at a 2 s stride, DREAMT a night...), and
#: the subjects where the declaration states none. Rough orders of magnitude, printed as assumed.
WINDOWS_PER_SUBJECT: dict[str, int] = {
    "bidmc": 48, "ppgbp": 3, "dalia": 4300, "dreamt": 2800, "wesad": 600, "butppg": 80, "ecsmp": 250,
    "realworldppg": 30, "wildppg": 5000,
}
ASSUMED_SUBJECTS: dict[str, int] = {"butppg": 50, "ecsmp": 89, "realworldppg": 35, "wildppg": 16}
#: Argument names that state an encoder's (or a wrapped module's) output size.
DIM_NAMES = ("embed_dim", "embedding_dim", "out_dim", "output_dim", "out_features")


@dataclass(frozen=True)
class TaskSize:
    """Labelled windows, groups and classes of one task at one rate, and where the figures come from."""

    rows: int
    groups: int
    classes: int
    windows: int  # every window of the dataset at that rate (what the embedding pass reads)
    source: str


def task_size(dm: Any, fs: float, task: Any, read_tree: bool = True) -> TaskSize:
    """The task's size from the processed tree when it can be read (and ``read_tree``), else as published."""
    if read_tree:
        try:
            import numpy as np

            view = dm.task_view(fs, task)
            classes = len(task.classes) or (len(np.unique(view.y)) if task.kind == "classification" else 1)
            return TaskSize(len(view.rows), len(np.unique(view.groups)), int(classes), len(dm.windows(fs).x),
                            "processed tree")
        except PPGBenchError:
            pass
    if dm.dataset == "synthetic":
        subjects, per_subject = dm.synthetic.n_subjects, dm.synthetic.windows_per_subject
        source = "the synthetic settings"
    else:
        subjects = dm.info.subjects or ASSUMED_SUBJECTS.get(dm.dataset, 20)
        per_subject = WINDOWS_PER_SUBJECT.get(dm.dataset, 500)
        source = f"assumed: no processed tree, ~{per_subject} windows x {subjects} subjects (published release)"
    if dm.max_subjects is not None:
        subjects = min(subjects, dm.max_subjects)
    if dm.max_windows_per_subject is not None:
        per_subject = min(per_subject, dm.max_windows_per_subject)
    classes = len(task.classes) or (subjects if task.kind == "classification" else 1)
    return TaskSize(subjects * per_subject, subjects, max(int(classes), 1), subjects * per_subject, source)


def embed_dim(entry: dict[str, Any], model: CostModel) -> tuple[int, str]:
    """(embedding size, where it comes from): measured, the encoder catalog, the config, the class, or assumed."""
    measured = model.encoders.get(encoder_key(entry))
    if measured and measured.get("embed_dim"):
        return int(measured["embed_dim"]), "measured"
    from ppgbench_pl.encoders.catalog import CATALOG

    for known in CATALOG.values():
        if known.class_path == entry.get("class_path") and known.embedding_dim:
            return int(known.embedding_dim), "catalog"
    found = declared_dim(entry) or declared_dim((entry.get("init_args") or {}).get("module"))
    return found if found else (DEFAULT_EMBED_DIM, "assumed")


def declared_dim(entry: Any) -> tuple[int, str] | None:
    """The size a ``class_path``/``init_args`` entry states: in its config, else as its class's default."""
    if not isinstance(entry, dict) or not entry.get("class_path"):
        return None
    args = entry.get("init_args") or {}
    for name in DIM_NAMES:
        if isinstance(args.get(name), int):
            return int(args[name]), "config"
    try:
        from ppgbench_pl.naming import import_class

        params = inspect.signature(import_class(str(entry["class_path"])).__init__).parameters
    except Exception:  # noqa: BLE001 - a class the dry run cannot import: the size is assumed, and says so
        return None
    for name in DIM_NAMES:
        if name in params and isinstance(params[name].default, int):
            return int(params[name].default), f"{name} default of {entry['class_path'].rsplit('.', 1)[-1]}"
    return None
