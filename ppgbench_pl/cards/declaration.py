"""A model's ``pretraining_data`` declaration, parsed and checked against the source vocabulary (plain data)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ppgbench_pl.cards.types import STATUSES, UNKNOWN, PretrainingSource
from ppgbench_pl.cards.vocabulary import check_name
from ppgbench_pl.errors import ConfigError

Declaration = tuple[PretrainingSource, ...] | str


def parse_declaration(value: Any, where: str) -> Declaration:
    """A user's ``pretraining_data``: ``unknown``/None, a name or a list (``[]``: not pretrained); ConfigError if bad.

    A list item is a name (``mesa``), ``{name: mesa, status: unconfirmed}``, or ``mesa (unconfirmed)``.
    """
    if value is None or value == UNKNOWN:
        return UNKNOWN
    items = [value] if isinstance(value, str | Mapping) else value
    if not isinstance(items, Sequence):
        raise ConfigError(f"{where}: pretraining_data must be 'unknown' or a list of source names, "
                          f"got {type(value).__name__}")
    out = []
    for item in items:
        if isinstance(item, Mapping):
            name, status = item.get("name"), item.get("status", "confirmed")
        elif isinstance(item, str) and item.endswith(")") and " (" in item:
            name, _, status = item[:-1].partition(" (")
        else:
            name, status = item, "confirmed"
        if not isinstance(name, str) or status not in STATUSES:
            raise ConfigError(f"{where}: pretraining_data item {item!r} must be a source name, optionally "
                              "with status confirmed or unconfirmed")
        out.append(PretrainingSource(check_name(name.strip().lower(), where), status))
    return tuple(out)


def declaration_json(data: Declaration) -> Any:
    """``"unknown"`` or ``[{"name": ..., "status": ...}, ...]``, as records and exports hold it."""
    return data if isinstance(data, str) else [{"name": s.name, "status": s.status} for s in data]
