"""Declaration of Real-World PPG (``realworldppg``, PROTOCOL.md 1.9; preprocessor: :mod:`.realworldppg`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, MendeleySource, TaskSpec

DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="realworldppg",
        display_name="RealWorldPPG",
        native_fs=50,
        window_s=6,
        stride_s=6,
        group="record",
        source="Mendeley Data yynb8t9x3d v1",
        description="6 s single-channel PPG records for biometric identification (train and test pooled).",
        access="open",
        preprocessor="ppgbench_pl.data.datasets.realworldppg:RealWorldPPGDataset",
    ),
    tasks=(
        TaskSpec("realworldppg-identification", "realworldppg", "id", "classification", "window", "primary",
                 description="closed-set, split by record (one class per participant)"),
    ),
    source=MendeleySource(dataset="yynb8t9x3d", version=1),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("siam2019realworldppg", "misc", (
        ("title", "Real-World {PPG} dataset"), ("author", "Siam, Amr and others"),
        ("howpublished", "Mendeley Data, v1"), ("year", "2019"), ("doi", "10.17632/yynb8t9x3d.1"))),
    publisher="Mendeley Data",
    license="CERN OHL v1.2", license_status="unconfirmed", access="open download",
    notes="licence as quoted from Mendeley in third-party code, not checked on Mendeley; original "
          "recordings (Egypt, Menoufia Univ.: unconfirmed)",
)
