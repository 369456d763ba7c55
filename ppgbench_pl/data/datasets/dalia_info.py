"""Declaration of PPG-DaLiA (``dalia``, PROTOCOL.md 1.2; preprocessor: :mod:`.dalia`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import ArchiveSource, DatasetDeclaration, DatasetInfo, TaskSpec

#: DaLiA's activity IDs 0-8, kept as they are (0 is the transient period between activities).
ACTIVITIES = ("transient", "sitting", "stairs", "table soccer", "cycling", "driving", "lunch break",
              "walking", "working")

DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="dalia",
        display_name="Dalia",
        native_fs=64,
        window_s=8,
        stride_s=2,
        group="participant",
        source="UCI ML Repository PPG-DaLiA (495)",
        subjects=15,
        description="Empatica E4 wrist BVP during daily activities, with ECG-derived heart rate labels.",
        license="CC BY 4.0",
        access="open",
        preprocessor="ppgbench_pl.data.datasets.dalia:DaliaDataset",
    ),
    tasks=(
        TaskSpec("dalia-hr", "dalia", "hr", "regression", "window", "primary",
                 description="the dataset's own ECG-derived heart rate per 8 s window", unit="bpm"),
        TaskSpec("dalia-activity", "dalia", "activity", "classification", "window", "primary",
                 description="activity ID of the window (raw IDs 0-8)", classes=ACTIVITIES),
    ),
    source=ArchiveSource(
        page="https://archive.ics.uci.edu/dataset/495/ppg+dalia",
        url="https://archive.ics.uci.edu/static/public/495/ppg+dalia.zip",
        filename="ppg+dalia.zip",
        nested=True,
    ),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("reiss2019deepppg", "article", (
        ("title", "Deep {PPG}: Large-Scale Heart Rate Estimation with Convolutional Neural Networks"),
        ("author", "Reiss, Attila and others"), ("journal", "Sensors"), ("volume", "19"), ("number", "14"),
        ("pages", "3079"), ("year", "2019"), ("doi", "10.3390/s19143079"))),
    publisher="UCI Machine Learning Repository, dataset 495 (DOI 10.24432/C53890)",
    license="CC BY 4.0", license_status="unconfirmed", access="open download",
    notes="licence from a third-party dataset card, not checked on the UCI page; original recordings "
          "(Univ. Siegen)",
)
