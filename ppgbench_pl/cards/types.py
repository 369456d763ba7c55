"""The cards' record types; every fact carries its source's status so a card never claims more (docs/cards.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["confirmed", "unconfirmed"]
STATUSES: tuple[str, ...] = ("confirmed", "unconfirmed")
#: The ``pretraining_overlap`` values, most serious first.
OVERLAPS: tuple[str, ...] = ("direct", "source", "unknown", "none")
#: What a model card says when nothing is declared (a user's model without ``pretraining_data``).
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Citation:
    """One BibTeX entry (fields in written order); ``unconfirmed``: the fields no source confirmed."""

    key: str
    entry_type: str
    fields: tuple[tuple[str, str], ...]
    unconfirmed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if missing := [name for name in self.unconfirmed if name not in dict(self.fields)]:
            raise ValueError(f"{self.key}: unconfirmed field(s) {', '.join(missing)} not in the entry")

    def field(self, name: str) -> str:
        """The value of one field ('' when absent)."""
        return dict(self.fields).get(name, "")


@dataclass(frozen=True)
class PretrainingSource:
    """One source database in a model's pretraining data (a name of :mod:`.vocabulary`) and its status."""

    name: str
    status: Status = "confirmed"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"{self.name}: status must be confirmed or unconfirmed, got {self.status!r}")

    def text(self) -> str:
        """``mimic-iii (unconfirmed)``, or just the name when confirmed."""
        return self.name if self.status == "confirmed" else f"{self.name} ({self.status})"


@dataclass(frozen=True)
class ModelCard:
    """What a user needs to know before reading an encoder's numbers ('' licences: none stated)."""

    name: str  # the catalog name, as in records and tables
    display_name: str
    paper: Citation | None
    weights_source: str
    weights_url: str | None
    weights_license: str
    weights_license_status: Status
    code_license: str
    parameters: int | None  # None: the user's module
    native_fs: float | None
    pretraining_data: tuple[PretrainingSource, ...] | str  # (): not pretrained; "unknown": nothing declared
    pretraining_complete: bool = True  # False: a partial list, so a dataset it does not name is unknown
    notes: str = ""

    def pretraining_text(self) -> str:
        """``vitaldb, mimic-iii, mesa``; ``none (not pretrained)``; ``unknown``."""
        if isinstance(self.pretraining_data, str):
            return UNKNOWN
        if not self.pretraining_data:
            return "none (not pretrained)"
        text = ", ".join(s.text() for s in self.pretraining_data)
        return text if self.pretraining_complete else f"{text}; list incomplete"


@dataclass(frozen=True)
class DatasetCard:
    """Where a benchmark dataset comes from, who publishes it, and on what terms ('' licence: none found)."""

    paper: Citation
    publisher: str
    license: str
    license_status: Status
    access: str
    derived_from: tuple[str, ...] = ()  # source databases (:mod:`.vocabulary`) its recordings come from
    notes: str = ""
