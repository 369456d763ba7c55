"""Declaration of the PPG-BP database (``ppgbp``, PROTOCOL.md 1.6; preprocessor: :mod:`.ppgbp`)."""

from __future__ import annotations

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, FigshareSource, TaskSpec, TaskTier

_NO_YES = ("no", "yes")


def _regression(suffix: str, target: str, what: str, unit: str) -> TaskSpec:
    return TaskSpec(f"ppgbp-{suffix}", "ppgbp", target, "regression", "subject", "primary",
                    description=what, unit=unit)


def _binary(suffix: str, target: str, tier: TaskTier, what: str) -> TaskSpec:
    return TaskSpec(f"ppgbp-{suffix}", "ppgbp", target, "classification", "subject", tier,
                    description=what, classes=_NO_YES)


DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="ppgbp",
        display_name="PPG-BP",
        native_fs=1000,
        window_s=2.1,
        stride_s=2.1,
        group="participant",
        source="Figshare 5459299 v5",
        subjects=219,
        description="Three 2.1 s fingertip PPG segments per participant with blood pressure and diagnoses.",
        access="open",
        preprocessor="ppgbench_pl.data.datasets.ppgbp:PPGBPDataset",
    ),
    tasks=(
        _regression("age", "age", "age", "years"),
        _regression("bmi", "bmi", "body-mass index", "kg/m^2"),
        _regression("sysbp", "sysbp", "systolic blood pressure", "mmHg"),
        _regression("diasbp", "diasbp", "diastolic blood pressure", "mmHg"),
        _regression("hr", "hr", "heart rate from the workbook", "bpm"),
        TaskSpec("ppgbp-hypertension", "ppgbp", "hypertension", "classification", "subject", "primary",
                 description="blood pressure category",
                 classes=("normal", "prehypertension", "stage 1 hypertension", "stage 2 hypertension")),
        _binary("diabetes", "diabetes", "primary", "diabetes diagnosis"),
        _binary("hypertension-binary", "hypertension_binary", "secondary", "any hypertension category"),
        _binary("cerebral-infarction", "cerebral_infarction", "secondary", "cerebral infarction diagnosis"),
        _binary("cerebrovascular-disease", "cerebrovascular_disease", "secondary",
                "cerebrovascular disease diagnosis"),
    ),
    source=FigshareSource(article=5459299, version=5, page="https://doi.org/10.6084/m9.figshare.5459299.v5"),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("liang2018ppgbp", "article", (
        ("title", "A new, short-recorded photoplethysmogram dataset for blood pressure monitoring in {China}"),
        ("author", "Liang, Yongbo and others"), ("journal", "Scientific Data"), ("volume", "5"),
        ("pages", "180020"), ("year", "2018"), ("doi", "10.1038/sdata.2018.20")), unconfirmed=("title",)),
    publisher="figshare",
    license="CC0 1.0", license_status="unconfirmed", access="open download",
    notes="licence from Google Dataset Search (marked as automatically derived), not checked on figshare; "
          "the paper's title is unconfirmed (it matches a third-party repository's description only)",
)
