"""The record types a dataset declares (facts, tasks, raw-file source); light, so naming a task is cheap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

TaskKind = Literal["regression", "classification", "regression_cls"]
TaskLevel = Literal["window", "subject"]
TaskTier = Literal["primary", "secondary"]
Access = Literal["built in", "open", "credentialed", "authors' terms"]


@dataclass(frozen=True)
class DatasetInfo:
    """What the protocol says about one dataset: folder name, native rate, windows, group unit."""

    key: str
    display_name: str
    native_fs: float
    window_s: float
    stride_s: float
    group: str
    #: The publisher and release, in words (the machine-readable source is the declaration's ``source``).
    source: str
    #: Participants (or records) in the publisher's release; None where the protocol does not state it.
    subjects: int | None = None
    description: str = ""
    #: The licence as the publisher states it; empty where the user should read the source page.
    license: str = ""
    access: Access = "open"
    #: ``module:Class`` of the :class:`~ppgbench_pl.data.datasets.base.RawDataset` that preprocesses it.
    preprocessor: str = ""


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation task: which target file of which dataset, its type, level and tier."""

    name: str
    dataset: str
    target: str
    kind: TaskKind
    level: TaskLevel
    tier: TaskTier
    #: Number of regression outputs (6 for the ECSMP emotion task), 1 otherwise.
    n_targets: int = 1
    description: str = ""
    #: Class names in label order (classification), or output names (regression_cls); () when the
    #: classes come from the data (e.g. one per participant) or for plain regression.
    classes: tuple[str, ...] = ()
    #: Unit of a regression target (``bpm``, ``mmHg``...); empty for classification.
    unit: str = ""

    @property
    def metric(self) -> str:
        """The reported metric of PROTOCOL.md section 2."""
        return {"regression": "mae", "classification": "balanced_accuracy",
                "regression_cls": "argmax_balanced_accuracy"}[self.kind]

    @property
    def higher_is_better(self) -> bool:
        """Direction of the reported metric."""
        return self.kind != "regression"


def _everything(_: str) -> bool:
    return True


@dataclass(frozen=True)
class Source:
    """Where a dataset's raw files come from: ``publisher`` is archive, figshare, mendeley or physionet."""

    publisher: str
    #: Public page recorded in ``source.json``.
    page: str
    #: The archive itself, the Figshare or Mendeley API root, or PhysioNet's ``files/<project>/<version>``
    #: folder (a mirror replaces it).
    base_url: str
    #: An archive's local name; ``nested``: extract archives found inside it too (DaLiA ships a zip of zips).
    filename: str = ""
    nested: bool = False
    #: The Figshare article, or the Mendeley dataset, and its version.
    article: int = 0
    dataset: str = ""
    version: int = 0
    credentialed: bool = False
    #: PhysioNet: fetches the files the benchmark needs from the project's tree (``registry.STEPS``).
    select: Callable[[Any], None] | None = None
    #: Mendeley: the folders worth listing, the files worth fetching.
    want_folder: Callable[[str], bool] = _everything
    want_file: Callable[[str], bool] = _everything

    def __post_init__(self) -> None:
        """A source nothing can fetch is refused when it is declared, not reported as an empty download."""
        if self.publisher not in ("archive", "figshare", "mendeley", "physionet"):
            raise ValueError(f"{self.page}: unknown publisher {self.publisher!r} (archive, figshare, mendeley or "
                             f"physionet)")
        if self.publisher == "physionet" and self.select is None:
            raise ValueError(f"{self.page}: a PhysioNet source needs a fetch step (registry.STEPS)")


@dataclass(frozen=True)
class DatasetDeclaration:
    """Everything the package knows about one dataset, declared once in ``data/datasets.json``."""

    info: DatasetInfo
    tasks: tuple[TaskSpec, ...]
    #: Where the raw files come from; None for a dataset that is generated, not downloaded.
    source: Source | None = None

    def __post_init__(self) -> None:
        """Refuse tasks that name another dataset or break the ``<key>-<suffix>`` naming."""
        for task in self.tasks:
            if task.dataset != self.info.key:
                raise ValueError(f"task {task.name} declares dataset {task.dataset}, not {self.info.key}")
            if not task.name.startswith(self.info.key + "-"):
                raise ValueError(f"task {task.name} must be named '{self.info.key}-<suffix>'")
