"""Declaration of ECSMP (``ecsmp``, PROTOCOL.md 1.5; preprocessor: :mod:`.ecsmp`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, MendeleySource, TaskSpec

#: The six felt-emotion scores, in the order of ``cesaf_scores.npy``.
EMOTIONS = ("neutral", "fear", "sad", "happy", "anger", "disgust")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def want_folder(path: str) -> bool:
    """ECSMP folders worth listing: ``E4/`` and ``EEG_downsample/`` with their subfolders."""
    return _under(path, "E4") or _under(path, "EEG_downsample")


def want_file(rel: str) -> bool:
    """ECSMP needs only ``scale.xlsx`` (root), ``E4/**/BVP.csv`` and everything under ``EEG_downsample/``."""
    if rel == "scale.xlsx" or _under(rel, "EEG_downsample"):
        return True
    return _under(rel, "E4") and rel.endswith("/BVP.csv")


DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="ecsmp",
        display_name="ECSMP",
        native_fs=64,
        window_s=10,
        stride_s=10,
        group="participant",
        source="Mendeley Data vn5nknh3mn v2",
        description="Empatica E4 wrist BVP while watching emotion videos, with felt-emotion and SDS scales.",
        access="open",
        preprocessor="ppgbench_pl.data.datasets.ecsmp:EcsmpDataset",
    ),
    tasks=(
        TaskSpec("ecsmp-sds-subject", "ecsmp", "sds_class", "classification", "subject", "primary",
                 description="SDS >= 50", classes=("SDS < 50", "SDS >= 50")),
        TaskSpec("ecsmp-emotion-reg-cls", "ecsmp", "cesaf_scores", "regression_cls", "window", "secondary",
                 n_targets=6, description="argmax of six felt scores", classes=EMOTIONS),
    ),
    source=MendeleySource(dataset="vn5nknh3mn", version=2, want_folder=want_folder, want_file=want_file),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("gao2021ecsmp", "article", (
        ("title", "A dataset on emotion, cognition, sleep and multi-modal physiological signals"),
        ("author", "Gao, Zhilin and others"), ("journal", "Data in Brief"), ("volume", "39"),
        ("pages", "107660"), ("year", "2021"), ("doi", "10.1016/j.dib.2021.107660")), unconfirmed=("doi",)),
    publisher="Mendeley Data (vn5nknh3mn, where the downloader fetches it)",
    license="", license_status="unconfirmed", access="open download",
    notes="the DOI string and the hosting repository are unconfirmed; original study (Southeast Univ., "
          "China: unconfirmed)",
)
