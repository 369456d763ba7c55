"""The record types of the cards: a citation, a pretraining source with its status, model and dataset cards.

Every fact a card states carries a status, ``confirmed`` or ``unconfirmed``, copied from where it was
found (``docs/cards.md`` names the sources): a card never states more certainty than its source, so an
overlap flag built on an unconfirmed fact says so.
"""

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
    """One BibTeX entry: its key, entry type and fields in the order they are written.

    Authors not found are written ``and others`` (valid BibTeX), never guessed. ``unconfirmed`` names the
    fields whose value no source confirmed (``docs/cards.md`` lists the sources of the others); the entry
    carries them in an ``unconfirmed`` field (BibTeX styles ignore it, a reader of the file sees it), and
    ``ppgbench list`` shows them beside the key.
    """

    key: str
    entry_type: str
    fields: tuple[tuple[str, str], ...]
    unconfirmed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse an ``unconfirmed`` name that is not one of the entry's fields."""
        missing = [name for name in self.unconfirmed if name not in dict(self.fields)]
        if missing:
            raise ValueError(f"{self.key}: unconfirmed field(s) {', '.join(missing)} not in the entry")

    def field(self, name: str) -> str:
        """The value of one field ('' when absent)."""
        return dict(self.fields).get(name, "")

    def written_fields(self) -> tuple[tuple[str, str], ...]:
        """The fields as written to a ``.bib`` file: the entry's, then ``unconfirmed`` when any is."""
        return (*self.fields, *((("unconfirmed", ", ".join(self.unconfirmed)),) if self.unconfirmed else ()))

    def label(self) -> str:
        """``key``, or ``key (title, doi unconfirmed)``: how listings name the entry."""
        return f"{self.key} ({', '.join(self.unconfirmed)} unconfirmed)" if self.unconfirmed else self.key


@dataclass(frozen=True)
class PretrainingSource:
    """One source database in a model's pretraining data (a name of :mod:`.vocabulary`) and its status."""

    name: str
    status: Status = "confirmed"

    def __post_init__(self) -> None:
        """Refuse a status that is not one of :data:`STATUSES`."""
        if self.status not in STATUSES:
            raise ValueError(f"{self.name}: status must be confirmed or unconfirmed, got {self.status!r}")

    def text(self) -> str:
        """``mimic-iii (unconfirmed)``, or just the name when confirmed."""
        return self.name if self.status == "confirmed" else f"{self.name} ({self.status})"


@dataclass(frozen=True)
class ModelCard:
    """What a user needs to know before reading an encoder's numbers.

    Attributes:
        name: The catalog name (the model name in records and tables).
        display_name: The name the authors use.
        paper: The paper to cite, or None (controls made by ppgbench, test stand-ins).
        weights_source: Where the weights are published, in words (from the catalog).
        weights_url: Their address, or None.
        weights_license: The weights' licence as found ('' where none is stated).
        weights_license_status: Whether that licence was confirmed on the publisher's page.
        code_license: The licence of the authors' code repository ('' where none is stated).
        parameters: Parameter count (None: the user's module).
        native_fs: Rate (Hz) the model runs at (None: the user's setting).
        pretraining_data: The source databases it was pretrained on (``()``: not pretrained), or
            ``"unknown"`` when nothing is declared.
        pretraining_complete: False when the list is known to be partial; a dataset it does not name is
            then ``unknown``, not ``none``.
        notes: What the flags rest on, in words (where a status comes from, known name clashes).

    """

    name: str
    display_name: str
    paper: Citation | None
    weights_source: str
    weights_url: str | None
    weights_license: str
    weights_license_status: Status
    code_license: str
    parameters: int | None
    native_fs: float | None
    pretraining_data: tuple[PretrainingSource, ...] | str
    pretraining_complete: bool = True
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
    """Where a benchmark dataset comes from, who publishes it, and on what terms.

    Attributes:
        paper: The dataset's paper (or data descriptor) to cite.
        publisher: Who hosts the release (PhysioNet, UCI, figshare, ...).
        license: The licence as found ('' where none was found).
        license_status: Whether the licence was confirmed on the publisher's own page.
        access: How one gets it, in words (open, a data use agreement, ...).
        derived_from: Source databases (names of :mod:`.vocabulary`) its recordings were taken from;
            ``()`` for original recordings.
        notes: Anything a user should know about these facts.

    """

    paper: Citation
    publisher: str
    license: str
    license_status: Status
    access: str
    derived_from: tuple[str, ...] = ()
    notes: str = ""
