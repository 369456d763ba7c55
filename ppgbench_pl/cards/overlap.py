"""``pretraining_overlap``: direct, source (a collection sharing its recordings), unknown or none (docs/cards.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ppgbench_pl.cards.declaration import Declaration, declaration_json
from ppgbench_pl.cards.types import OVERLAPS, UNKNOWN, PretrainingSource
from ppgbench_pl.cards.vocabulary import components

RANDOM_INIT_SUFFIX = " (random init)"


@dataclass(frozen=True)
class Overlap:
    """One flag, the pretraining sources it rests on, and the weakest status among them."""

    value: str
    via: tuple[str, ...] = ()
    status: str = "confirmed"


def dataset_components(dataset: str) -> frozenset[str] | None:
    """The dataset and every collection its recordings come from; None for a dataset without a card."""
    from ppgbench_pl.data.registry import CARDS, DATASETS

    if dataset in CARDS:
        return frozenset({dataset}.union(*map(components, CARDS[dataset].derived_from)))
    return frozenset({dataset}) if dataset in DATASETS else None  # the generated dataset: itself only


def overlap(data: Declaration, complete: bool, dataset: str) -> Overlap:
    """The flag of a model with this pretraining declaration tested on ``dataset`` (module docstring)."""
    if isinstance(data, str):
        return Overlap(UNKNOWN)
    if direct := [s for s in data if s.name == dataset]:
        return Overlap("direct", tuple(s.name for s in direct), _weakest(direct))
    theirs = dataset_components(dataset)
    if shared := [s for s in data if theirs is not None and components(s.name) & theirs]:
        return Overlap("source", tuple(s.name for s in shared), _weakest(shared))
    from ppgbench_pl.data.registry import DATASETS

    generated = dataset in DATASETS and DATASETS[dataset].access == "built in"  # the synthetic set: nobody saw it
    if not data or generated or (complete and theirs is not None):
        return Overlap("none")  # not pretrained, a dataset made on the user's machine, or a full list
    return Overlap(UNKNOWN)


def _weakest(sources: Sequence[PretrainingSource]) -> str:
    return "unconfirmed" if any(s.status == "unconfirmed" for s in sources) else "confirmed"


def card_declaration(model: str) -> tuple[Declaration, bool]:
    """What the model card of a catalog name declares; ``unknown`` for a name without a card."""
    from ppgbench_pl.encoders.cards import MODEL_CARDS

    if model.endswith(RANDOM_INIT_SUFFIX):
        return (), True  # evaluated untrained: it saw nothing
    card = MODEL_CARDS.get(model)
    if card is None or card.name == "custom":
        return UNKNOWN, True
    return card.pretraining_data, card.pretraining_complete


def dataset_of(task: str) -> str:
    """The dataset of a task name (the registry's, else the part before the first hyphen)."""
    from ppgbench_pl.data.registry import TASKS

    return TASKS[task].dataset if task in TASKS else task.split("-", 1)[0]


def record_fields(encoder: Any, task: str) -> dict[str, Any]:
    """The fields a job record carries: the declaration, the flag, what it rests on and its status."""
    # evaluated untrained: it saw nothing; else the user's own list, else the card's
    own = () if getattr(encoder, "random_init", False) else getattr(encoder, "pretraining_declaration", None)
    data, complete = (own, True) if own is not None else card_declaration(str(getattr(type(encoder), "name", "")))
    flag = overlap(data, complete, dataset_of(task))
    return {"pretraining_data": declaration_json(data), "pretraining_complete": complete,
            "pretraining_overlap": flag.value, "pretraining_overlap_via": list(flag.via),
            "pretraining_overlap_status": flag.status}


def record_overlap(record: Mapping[str, Any]) -> str:
    """A record's flag: the one it carries, else (older records) the model card's, else ``unknown``."""
    value = record.get("pretraining_overlap")
    if value in OVERLAPS:
        return str(value)
    data, complete = card_declaration(str(record.get("model", "")))
    return overlap(data, complete, dataset_of(str(record.get("task", "")))).value
