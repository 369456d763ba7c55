"""The datasets and tasks ppgbench knows, read from their declarations in ``datasets.json`` (PROTOCOL.md 1-2).

Each dataset declares its facts, tasks, source and card once, in ``datasets.json`` (the code-valued parts of
a source in :mod:`.selection`). Everything that names a dataset or task resolves it here, so a typo
fails fast with a one-line error. Importing it loads no numpy, pandas, scipy or torch.
"""

from __future__ import annotations

import difflib
import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.selection import STEPS
from ppgbench_pl.data.spec import (
    ArchiveSource,
    DatasetDeclaration,
    DatasetInfo,
    FigshareSource,
    MendeleySource,
    PhysioNetSource,
    SourceSpec,
    TaskSpec,
)
from ppgbench_pl.errors import ConfigError

if TYPE_CHECKING:
    from ppgbench_pl.data.datasets.base import RawDataset

_KINDS = {kind.publisher: kind for kind in (ArchiveSource, FigshareSource, MendeleySource, PhysioNetSource)}


def _tuples(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()}


def _declaration(key: str, entry: dict[str, Any]) -> DatasetDeclaration:
    tasks = tuple(TaskSpec(dataset=key, **_tuples(task)) for task in entry["tasks"])
    source: dict[str, Any] = {**entry.get("source", {}), **STEPS.get(key, {})}
    spec = _KINDS[source.pop("publisher")](**source) if source else None
    return DatasetDeclaration(DatasetInfo(key=key, **entry["info"]), tasks, spec)


def _card(entry: dict[str, Any]) -> DatasetCard:
    paper = entry["paper"]
    citation = Citation(paper["key"], paper["entry_type"], tuple(paper["fields"].items()),
                        tuple(paper.get("unconfirmed", ())))
    return DatasetCard(paper=citation, **_tuples({k: v for k, v in entry.items() if k != "paper"}))


_DECLARED: dict[str, Any] = json.loads(Path(__file__).with_name("datasets.json").read_text(encoding="utf-8"))
#: Every declared dataset, in registry order: the built-in synthetic one, then PROTOCOL.md 1.0's order.
DATASET_KEYS: tuple[str, ...] = tuple(_DECLARED)
DECLARATIONS: dict[str, DatasetDeclaration] = {key: _declaration(key, entry) for key, entry in _DECLARED.items()}
DATASETS: dict[str, DatasetInfo] = {key: d.info for key, d in DECLARATIONS.items()}
TASKS: dict[str, TaskSpec] = {t.name: t for d in DECLARATIONS.values() for t in d.tasks}
#: Download sources of the datasets that have one (all but the generated ones).
SOURCES: dict[str, SourceSpec] = {key: d.source for key, d in DECLARATIONS.items() if d.source is not None}
#: The downloadable benchmark datasets (every declared dataset except the generated ones).
REAL_DATASETS: tuple[str, ...] = tuple(SOURCES)
#: Dataset key -> its card (paper, publisher, licence, provenance).
CARDS: dict[str, DatasetCard] = {key: _card(e["card"]) for key, e in _DECLARED.items() if "card" in e}


def _unknown(kind: str, name: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
    return ConfigError(f"unknown {kind} '{name}'{hint}")


def get_dataset(key: str) -> DatasetInfo:
    """Look up a dataset by key, with a one-line error and suggestions when unknown."""
    if key not in DATASETS:
        raise _unknown("dataset", key, list(DATASETS))
    return DATASETS[key]


def preprocessor(key: str) -> type[RawDataset]:
    """The preprocessor class a dataset's declaration names (any declared dataset, synthetic included)."""
    info = DATASETS.get(key)
    if info is None or not info.preprocessor:
        raise ConfigError(f"no preprocessor for dataset '{key}'; known: {', '.join(REAL_DATASETS)}")
    module, _, attr = info.preprocessor.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


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
