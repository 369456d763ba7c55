"""The datasets and tasks ppgbench knows, assembled from each dataset's declaration (PROTOCOL.md 1-2).

Each dataset declares its facts, tasks and source once, as ``DECLARATION`` in its light module
``datasets/<key>_info.py``. Everything that names a dataset or task resolves it here, so a typo fails fast
with a one-line error. Importing it loads no numpy, pandas, scipy or torch.
"""

from __future__ import annotations

import difflib
import importlib

from ppgbench_pl.cards.types import DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, SourceSpec, TaskSpec
from ppgbench_pl.errors import ConfigError

#: Every declared dataset, in registry order: the built-in synthetic one, then PROTOCOL.md 1.0's order.
#: A new one needs its key here plus ``datasets/<key>_info.py`` and ``datasets/<key>.py``.
DATASET_KEYS: tuple[str, ...] = (
    "synthetic",
    "dalia",
    "dreamt",
    "wesad",
    "ecsmp",
    "ppgbp",
    "bidmc",
    "butppg",
    "realworldppg",
    "wildppg",
)
_MODULES = {key: importlib.import_module(f"ppgbench_pl.data.datasets.{key}_info") for key in DATASET_KEYS}
for _key, _module in _MODULES.items():
    if not isinstance(_module.DECLARATION, DatasetDeclaration) or _module.DECLARATION.info.key != _key:
        raise TypeError(f"{_module.__name__}.DECLARATION must declare dataset '{_key}'")

DECLARATIONS: dict[str, DatasetDeclaration] = {key: module.DECLARATION for key, module in _MODULES.items()}
DATASETS: dict[str, DatasetInfo] = {key: d.info for key, d in DECLARATIONS.items()}
TASKS: dict[str, TaskSpec] = {t.name: t for d in DECLARATIONS.values() for t in d.tasks}
#: Download sources of the datasets that have one (all but the generated ones).
SOURCES: dict[str, SourceSpec] = {key: d.source for key, d in DECLARATIONS.items() if d.source is not None}
#: The downloadable benchmark datasets (every declared dataset except the generated ones).
REAL_DATASETS: tuple[str, ...] = tuple(SOURCES)
#: Dataset key -> the ``CARD`` (paper, publisher, licence, provenance) declared beside its declaration.
CARDS: dict[str, DatasetCard] = {
    key: module.CARD for key, module in _MODULES.items() if isinstance(getattr(module, "CARD", None), DatasetCard)
}


def _unknown(kind: str, name: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
    return ConfigError(f"unknown {kind} '{name}'{hint}")


def get_dataset(key: str) -> DatasetInfo:
    """Look up a dataset by key, with a one-line error and suggestions when unknown."""
    if key not in DATASETS:
        raise _unknown("dataset", key, list(DATASETS))
    return DATASETS[key]


def get_task(name: str) -> TaskSpec:
    """Look up a task by name, with a one-line error and suggestions when unknown."""
    if name not in TASKS:
        raise _unknown("task", name, list(TASKS))
    return TASKS[name]


def tasks_of(dataset: str) -> list[TaskSpec]:
    """All tasks defined on one dataset, in registry order (unknown dataset: as :func:`get_dataset`)."""
    return list(DECLARATIONS[get_dataset(dataset).key].tasks)


def select_tasks(
    dataset: str | None = None, tier: str | None = None, kind: str | None = None
) -> list[TaskSpec]:
    """Tasks in registry order, filtered by dataset, tier and kind (each validated, one-line errors)."""
    if tier is not None and tier not in ("primary", "secondary"):
        raise _unknown("tier", tier, ["primary", "secondary"])
    if kind is not None and kind not in ("regression", "classification", "regression_cls"):
        raise _unknown("task kind", kind, ["regression", "classification", "regression_cls"])
    tasks = tasks_of(dataset) if dataset is not None else list(TASKS.values())
    return [t for t in tasks if (tier is None or t.tier == tier) and (kind is None or t.kind == kind)]
