"""Declaration of BUT PPG (``butppg``, PROTOCOL.md 1.8; preprocessor: :mod:`.butppg`)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import (
    DatasetDeclaration,
    DatasetInfo,
    PhysioNetSource,
    RemoteTree,
    TaskSpec,
    TaskTier,
)
from ppgbench_pl.errors import DownloadError


def quality_one_records(path: Path) -> list[str]:
    """Record IDs with ``Quality == 1`` in BUT-PPG's ``quality-hr-ann.csv`` (UTF-8, maybe with a BOM)."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = {(name or "").strip(): name for name in reader.fieldnames or []}
        if "ID" not in fields or "Quality" not in fields:
            raise DownloadError(f"{path}: expected columns ID and Quality")
        records: set[str] = set()
        for row in reader:
            rec = (row.get(fields["ID"]) or "").strip()
            try:
                good = float((row.get(fields["Quality"]) or "").strip()) == 1.0
            except ValueError:
                good = False
            if good:
                if not re.fullmatch(r"\d+", rec):
                    raise DownloadError(f"{path}: unexpected record ID {rec!r}")
                records.add(rec)
    return sorted(records)


def select(tree: RemoteTree) -> None:
    """The two CSVs, then ``<rec>/<rec>_PPG.dat`` and ``.hea`` for the records with Quality == 1."""
    tree.fetch("subject-info.csv")
    quality = tree.fetch("quality-hr-ann.csv")
    records = quality_one_records(quality)
    if not records:
        raise DownloadError(f"{quality}: no record has Quality == 1")
    for rec in records:
        for ext in (".hea", ".dat"):
            tree.fetch(f"{rec}/{rec}_PPG{ext}")


def _regression(suffix: str, tier: TaskTier, what: str, unit: str) -> TaskSpec:
    return TaskSpec(f"butppg-{suffix}", "butppg", suffix, "regression", "window", tier,
                    description=what, unit=unit)


DECLARATION = DatasetDeclaration(
    info=DatasetInfo(
        key="butppg",
        display_name="BUT-PPG",
        native_fs=30,
        window_s=10,
        stride_s=10,
        group="participant",
        source="PhysioNet BUT PPG 2.0.0",
        description="10 s smartphone-camera PPG records (Quality = 1 only) with glycaemia, BP and SpO2.",
        license="CC BY 4.0",
        access="open",
        preprocessor="ppgbench_pl.data.datasets.butppg:ButPPGDataset",
    ),
    tasks=(
        _regression("glyc", "primary", "glycaemia", "mmol/l"),
        _regression("sbp", "secondary", "systolic blood pressure", "mmHg"),
        _regression("dbp", "secondary", "diastolic blood pressure", "mmHg"),
        _regression("spo2", "secondary", "SpO2", "%"),
    ),
    source=PhysioNetSource(project="butppg", version="2.0.0", select=select),
)

#: Paper, publisher, licence and provenance (sources: docs/cards.md).
CARD = DatasetCard(
    paper=Citation("nemcova2021butppg", "article", (
        ("title", "Brno University of Technology Smartphone {PPG} Database ({BUT PPG}): Annotated Dataset for "
                  "{PPG} Quality Assessment and Heart Rate Estimation"),
        ("author", "Nemcova, Andrea and others"), ("journal", "BioMed Research International"),
        ("year", "2021"), ("doi", "10.1155/2021/3453007"))),
    publisher="PhysioNet (project butppg, v2.0.0, DOI 10.13026/tn53-8153)",
    license="CC BY 4.0", license_status="unconfirmed", access="PhysioNet open access",
    notes="original recordings (BUT, Brno); the licence name is the one the declaration above states: the "
          "gathered facts say only PhysioNet open access",
)
