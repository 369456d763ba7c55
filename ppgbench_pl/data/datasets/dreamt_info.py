"""Declaration of DREAMT (``dreamt``, PROTOCOL.md 1.3; preprocessor: :mod:`.dreamt`)."""

from __future__ import annotations

import re
import urllib.parse

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, PhysioNetSource, RemoteTree, TaskSpec
from ppgbench_pl.errors import DownloadError

_HREF = re.compile(r"""href\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_FILE = re.compile(r"S\d{3}_whole_df\.csv")
LISTING = "data_64Hz/"


def listed_files(html: str) -> list[str]:
    """The ``S###_whole_df.csv`` names linked from a PhysioNet directory listing, sorted."""
    names = set()
    for href in _HREF.findall(html):
        name = urllib.parse.unquote(href.split("?")[0]).rsplit("/", 1)[-1]
        if _FILE.fullmatch(name):
            names.add(name)
    return sorted(names)


def select(tree: RemoteTree) -> None:
    """Scrape the ``data_64Hz/`` listing for ``S###_whole_df.csv`` and fetch each file."""
    names = listed_files(tree.text(LISTING))
    if not names:
        raise DownloadError(f"{tree.url(LISTING)}: no S###_whole_df.csv files in the listing")
    for name in names:
        tree.fetch(LISTING + name)


DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="dreamt",
        display_name="DREAMT",
        native_fs=64,
        window_s=10,
        stride_s=10,
        group="participant",
        source="PhysioNet DREAMT 2.1.0 (credentialed)",
        subjects=100,
        description="Overnight Empatica E4 wrist BVP with expert sleep staging.",
        license="PhysioNet Credentialed Health Data License 1.5.0",
        access="credentialed",
        preprocessor="ppgbench_pl.data.datasets.dreamt:DreamtDataset",
    ),
    tasks=(
        TaskSpec("dreamt-sleep-5class", "dreamt", "sleep_5class", "classification", "window", "primary",
                 description="sleep stage of the window", classes=("W", "N1", "N2", "N3", "R")),
    ),
    source=PhysioNetSource(project="dreamt", version="2.1.0", select=select, credentialed=True),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("wang2024dreamt", "misc", (
        ("title", "{DREAMT}: Dataset for Real-time sleep stage EstimAtion using Multisensor wearable "
                  "Technology"),
        ("author", "Wang, Ke and others"), ("howpublished", "PhysioNet"), ("year", "2024"),
        ("doi", "10.13026/62an-cb28"), ("note", "version 1.0.0"))),
    publisher="PhysioNet (project dreamt)",
    license="", license_status="unconfirmed",
    access="PhysioNet restricted access: sign a data use agreement",
    notes="the facts found cover v1.0.0/1.0.1 (restricted access, exact licence name unconfirmed); the "
          "declaration above fetches version 2.1.0 as credentialed; original overnight PSG + wearable study",
)
