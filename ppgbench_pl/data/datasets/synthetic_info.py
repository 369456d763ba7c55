"""Declaration of the built-in synthetic dataset (preprocessor: :mod:`ppgbench_pl.data.synthetic`)."""

from __future__ import annotations

from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, TaskSpec

DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="synthetic",
        display_name="Synthetic",
        native_fs=128,
        window_s=10,
        stride_s=10,
        group="simulated subject",
        source="built in (neurokit2 ppg_simulate)",
        subjects=30,
        description="Seeded simulated subjects with known heart rate, activity, arterial stiffness and age.",
        license="generated locally",
        access="built in",
        preprocessor="ppgbench_pl.data.synthetic:SyntheticPPGDataset",
    ),
    tasks=(
        TaskSpec("synthetic-hr", "synthetic", "hr", "regression", "window", "primary",
                 description="heart rate the simulator was driven with (bpm)", unit="bpm"),
        TaskSpec("synthetic-activity", "synthetic", "activity", "classification", "window", "primary",
                 description="rest / walk / run from motion level", classes=("rest", "walk", "run")),
        TaskSpec("synthetic-stiffness", "synthetic", "stiffness", "classification", "subject", "primary",
                 description="arterial stiffness (reflected wave)", classes=("compliant", "stiff")),
        TaskSpec("synthetic-age", "synthetic", "age", "regression", "subject", "secondary",
                 description="age, which drives stiffness and resting HR", unit="years"),
    ),
)
