"""The datasets and tasks ppgbench knows, assembled from each dataset's declaration (PROTOCOL.md 1-2).

A dataset declares its facts, tasks and download source once, as ``DECLARATION`` in its light module
``ppgbench_pl/data/datasets/<key>_info.py`` (the preprocessor it names lives next to it in ``<key>.py``,
which imports the heavy readers). This module lists those keys and builds the lookup tables from them.
Everything that names a dataset or task (configs, the CLI, the benchmark plan) resolves it here, so a
typo fails fast with a one-line error instead of deep inside a job. Importing it loads no numpy,
pandas, scipy or torch.
"""

from __future__ import annotations

import difflib
import importlib

from ppgbench_pl.cards.types import DatasetCard
from ppgbench_pl.data.spec import (
    DatasetDeclaration,
    DatasetInfo,
    SourceSpec,
    TaskKind,
    TaskLevel,
    TaskSpec,
    TaskTier,
)
from ppgbench_pl.errors import ConfigError

__all__ = [
    "CARDS",
    "DATASETS",
    "DATASET_KEYS",
    "DECLARATIONS",
    "REAL_DATASETS",
    "SOURCES",
    "TASKS",
    "DatasetDeclaration",
    "DatasetInfo",
    "SourceSpec",
    "TaskKind",
    "TaskLevel",
    "TaskSpec",
    "TaskTier",
    "declaration_module",
    "get_dataset",
    "get_declaration",
    "get_task",
    "select_tasks",
    "tasks_of",
]

#: Every declared dataset, in registry order: the built-in synthetic one, then PROTOCOL.md 1.0's order.
#: Adding a dataset means adding its key here and writing ``datasets/<key>_info.py`` and ``datasets/<key>.py``
#: (the completeness test in ``tests/data/test_registry.py`` names whatever is missing).
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


def declaration_module(key: str) -> str:
    """The module that declares dataset ``key``."""
    return f"ppgbench_pl.data.datasets.{key}_info"


def _load(keys: tuple[str, ...]) -> dict[str, DatasetDeclaration]:
    out: dict[str, DatasetDeclaration] = {}
    for key in keys:
        declaration = importlib.import_module(declaration_module(key)).DECLARATION
        if not isinstance(declaration, DatasetDeclaration) or declaration.info.key != key:
            raise TypeError(f"{declaration_module(key)}.DECLARATION must declare dataset '{key}'")
        out[key] = declaration
    return out


DECLARATIONS: dict[str, DatasetDeclaration] = _load(DATASET_KEYS)
DATASETS: dict[str, DatasetInfo] = {key: d.info for key, d in DECLARATIONS.items()}
TASKS: dict[str, TaskSpec] = {t.name: t for d in DECLARATIONS.values() for t in d.tasks}
#: Download sources of the datasets that have one (all but the generated ones).
SOURCES: dict[str, SourceSpec] = {key: d.source for key, d in DECLARATIONS.items() if d.source is not None}
#: The downloadable benchmark datasets (every declared dataset except the generated ones).
REAL_DATASETS: tuple[str, ...] = tuple(SOURCES)


def _cards(keys: tuple[str, ...]) -> dict[str, DatasetCard]:
    """The ``CARD`` each dataset module declares beside its ``DECLARATION`` (the generated ones have none)."""
    found = {key: getattr(importlib.import_module(declaration_module(key)), "CARD", None) for key in keys}
    return {key: card for key, card in found.items() if isinstance(card, DatasetCard)}


#: Dataset key -> its card (paper, publisher, licence, provenance); every benchmark dataset has one.
CARDS: dict[str, DatasetCard] = _cards(DATASET_KEYS)


def _unknown(kind: str, name: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
    return ConfigError(f"unknown {kind} '{name}'{hint}")


def get_dataset(key: str) -> DatasetInfo:
    """Look up a dataset by key, with a one-line error and suggestions when unknown."""
    if key not in DATASETS:
        raise _unknown("dataset", key, list(DATASETS))
    return DATASETS[key]


def get_declaration(key: str) -> DatasetDeclaration:
    """A dataset's whole declaration (facts, tasks, source), with the same error as :func:`get_dataset`."""
    get_dataset(key)
    return DECLARATIONS[key]


def get_task(name: str) -> TaskSpec:
    """Look up a task by name, with a one-line error and suggestions when unknown."""
    if name not in TASKS:
        raise _unknown("task", name, list(TASKS))
    return TASKS[name]


def tasks_of(dataset: str) -> list[TaskSpec]:
    """All tasks defined on one dataset, in registry order."""
    return list(get_declaration(dataset).tasks)


_TIERS = ("primary", "secondary")
_KINDS = ("regression", "classification", "regression_cls")


def select_tasks(
    dataset: str | None = None, tier: str | None = None, kind: str | None = None
) -> list[TaskSpec]:
    """Tasks in registry order, filtered by dataset, tier and kind (each validated, one-line errors)."""
    if tier is not None and tier not in _TIERS:
        raise _unknown("tier", tier, list(_TIERS))
    if kind is not None and kind not in _KINDS:
        raise _unknown("task kind", kind, list(_KINDS))
    tasks = tasks_of(dataset) if dataset is not None else list(TASKS.values())
    return [t for t in tasks if (tier is None or t.tier == tier) and (kind is None or t.kind == kind)]
