"""Declaration of BIDMC PPG and Respiration (``bidmc``, PROTOCOL.md 1.7; preprocessor: :mod:`.bidmc`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, PhysioNetSource, RemoteTree, TaskSpec

RECORDS = 53


def select(tree: RemoteTree) -> None:
    """The 106 CSVs ``bidmc_csv/bidmc_NN_{Signals,Numerics}.csv`` for NN = 01..53."""
    for n in range(1, RECORDS + 1):
        for kind in ("Signals", "Numerics"):
            tree.fetch(f"bidmc_csv/bidmc_{n:02d}_{kind}.csv")


DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="bidmc",
        display_name="BIDMC",
        native_fs=125,
        window_s=10,
        stride_s=10,
        group="record",
        source="PhysioNet BIDMC 1.0.0",
        subjects=RECORDS,
        description="8-minute ICU fingertip PPG records with respiration rate and SpO2 at 1 Hz.",
        license="ODC-By 1.0",
        access="open",
        preprocessor="ppgbench_pl.data.datasets.bidmc:BidmcDataset",
    ),
    tasks=(
        TaskSpec("bidmc-resp", "bidmc", "resp", "regression", "window", "primary",
                 description="mean respiration rate over the window", unit="breaths/min"),
        TaskSpec("bidmc-spo2", "bidmc", "spo2", "regression", "window", "primary",
                 description="mean SpO2 over the window", unit="%"),
    ),
    source=PhysioNetSource(project="bidmc", version="1.0.0", select=select),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("pimentel2017bidmc", "article", (
        ("title", "Toward a Robust Estimation of Respiratory Rate From Pulse Oximeters"),
        ("author", "Pimentel, Marco A. F. and others"),
        ("journal", "IEEE Transactions on Biomedical Engineering"), ("volume", "64"), ("number", "8"),
        ("pages", "1914--1923"), ("year", "2017"), ("doi", "10.1109/TBME.2016.2613124"))),
    publisher="PhysioNet (project bidmc, v1.0.0)",
    license="ODC-By 1.0", license_status="unconfirmed", access="PhysioNet open access",
    derived_from=("mimic-ii",),
    notes="taken from the MIMIC-II matched waveform database (BIDMC ICU patients); the licence name is the "
          "one the declaration above states: the gathered facts say only PhysioNet open access",
)
