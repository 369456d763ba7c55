"""Declaration of WildPPG (``wildppg``, PROTOCOL.md 1.10; preprocessor: :mod:`.wildppg`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import ArchiveSource, DatasetDeclaration, DatasetInfo, TaskSpec

DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="wildppg",
        display_name="WildPPG",
        native_fs=128,
        window_s=8,
        stride_s=8,
        group="participant",
        source="WildPPG (ETH SIPLab)",
        description="Long outdoor recordings of wrist green PPG with a sternum ECG for heart rate labels.",
        access="authors' terms",
        preprocessor="ppgbench_pl.data.datasets.wildppg:WildPPGDataset",
    ),
    tasks=(
        TaskSpec("wildppg-hr", "wildppg", "hr", "regression", "window", "primary",
                 description="heart rate from the sternum ECG's R peaks", unit="bpm"),
    ),
    source=ArchiveSource(
        page="https://siplab.org/projects/WildPPG",
        # The ETH Polybox share linked from the project page (whole share as one zip, about 20 GB);
        # override with PPGBENCH_MIRROR_WILDPPG if the authors move it.
        url="https://polybox.ethz.ch/index.php/s/NWTuyNojU7aya1y/download",
        filename="WildPPG.zip",
    ),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("meier2024wildppg", "inproceedings", (
        ("title", "{WildPPG}: A Real-World {PPG} Dataset of Long Continuous Recordings"),
        ("author", "Meier, Manuel and others"),
        ("booktitle", "Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks "
                      "Track"),
        ("year", "2024"), ("eprint", "2412.17540"), ("archiveprefix", "arXiv"))),
    publisher="ETH Zurich SIPLab (siplab.org/projects/WildPPG; Hugging Face mirror eth-siplab/WildPPG)",
    license="MIT", license_status="unconfirmed", access="open download",
    notes="MIT according to the Hugging Face card; the licence on the project site is unconfirmed",
)
