"""Declaration of WESAD (``wesad``, PROTOCOL.md 1.4; preprocessor: :mod:`.wesad`)."""

from __future__ import annotations

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
