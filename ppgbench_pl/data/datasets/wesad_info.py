"""Declaration of WESAD (``wesad``, PROTOCOL.md 1.4; preprocessor: :mod:`.wesad`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import ArchiveSource, DatasetDeclaration, DatasetInfo, TaskSpec

DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="wesad",
        display_name="WESAD",
        native_fs=64,
        window_s=10,
        stride_s=10,
        group="participant",
        source="WESAD (Univ. Siegen)",
        subjects=15,
        description="Empatica E4 wrist BVP under baseline, stress, amusement and meditation, with ratings.",
        access="authors' terms",
        preprocessor="ppgbench_pl.data.datasets.wesad:WesadDataset",
    ),
    tasks=(
        TaskSpec("wesad-4class", "wesad", "condition_4class", "classification", "window", "primary",
                 description="study condition of the window",
                 classes=("baseline", "stress", "amusement", "meditation")),
        TaskSpec("wesad-valence-reg", "wesad", "valence_reg", "regression", "window", "secondary",
                 description="self-reported valence of the condition", unit="SAM 1-9"),
        TaskSpec("wesad-arousal-reg", "wesad", "arousal_reg", "regression", "window", "secondary",
                 description="self-reported arousal of the condition", unit="SAM 1-9"),
    ),
    source=ArchiveSource(
        page="https://ubi29.informatik.uni-siegen.de/usi/data_wesad.html",
        # The authors' Sciebo share linked from the project page; override with PPGBENCH_MIRROR_WESAD.
        url="https://uni-siegen.sciebo.de/s/HGdUkoNlW1Ub0Gx/download",
        filename="WESAD.zip",
    ),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("schmidt2018wesad", "inproceedings", (
        ("title", "Introducing {WESAD}, a Multimodal Dataset for Wearable Stress and Affect Detection"),
        ("author", "Schmidt, Philip and others"),
        ("booktitle", "Proceedings of the 20th ACM International Conference on Multimodal Interaction "
                      "(ICMI '18)"),
        ("pages", "400--408"), ("year", "2018"), ("doi", "10.1145/3242969.3242985"))),
    publisher="Univ. Siegen (download page)",
    license="", license_status="unconfirmed", access="public download",
    notes="original lab study (Bosch / Univ. Siegen)",
)
