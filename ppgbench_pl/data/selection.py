"""The code part of the dataset declarations (``datasets.json``): which published files a source needs.

A PhysioNet source's ``select`` fetches the files the benchmark needs from the project's tree; a Mendeley
source may list only some folders and files. The WESAD and WildPPG archives are the authors' shares linked
from their project pages (``PPGBENCH_MIRROR_<KEY>`` replaces them if the authors move them).
"""

from __future__ import annotations

import csv
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import DownloadError

if TYPE_CHECKING:  # the download machinery stays out of the light registry import
    from ppgbench_pl.data.download import Job

BIDMC_RECORDS = 53
_HREF = re.compile(r"""href\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_DREAMT_FILE = re.compile(r"S\d{3}_whole_df\.csv")
DREAMT_LISTING = "data_64Hz/"


def bidmc_select(tree: Job) -> None:
    """The 106 CSVs ``bidmc_csv/bidmc_NN_{Signals,Numerics}.csv`` for NN = 01..53."""
    for n in range(1, BIDMC_RECORDS + 1):
        for kind in ("Signals", "Numerics"):
            tree.fetch(f"bidmc_csv/bidmc_{n:02d}_{kind}.csv")


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


def butppg_select(tree: Job) -> None:
    """The two CSVs, then ``<rec>/<rec>_PPG.dat`` and ``.hea`` for the records with Quality == 1."""
    tree.fetch("subject-info.csv")
    quality = tree.fetch("quality-hr-ann.csv")
    records = quality_one_records(quality)
    if not records:
        raise DownloadError(f"{quality}: no record has Quality == 1")
    for rec in records:
        for ext in (".hea", ".dat"):
            tree.fetch(f"{rec}/{rec}_PPG{ext}")


def listed_files(html: str) -> list[str]:
    """The ``S###_whole_df.csv`` names linked from a PhysioNet directory listing, sorted."""
    names = set()
    for href in _HREF.findall(html):
        name = urllib.parse.unquote(href.split("?")[0]).rsplit("/", 1)[-1]
        if _DREAMT_FILE.fullmatch(name):
            names.add(name)
    return sorted(names)


def dreamt_select(tree: Job) -> None:
    """Scrape the ``data_64Hz/`` listing for ``S###_whole_df.csv`` and fetch each file."""
    names = listed_files(tree.text(DREAMT_LISTING))
    if not names:
        raise DownloadError(f"{tree.url(DREAMT_LISTING)}: no S###_whole_df.csv files in the listing")
    for name in names:
        tree.fetch(DREAMT_LISTING + name)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def ecsmp_want_folder(path: str) -> bool:
    """ECSMP folders worth listing: ``E4/`` and ``EEG_downsample/`` with their subfolders."""
    return _under(path, "E4") or _under(path, "EEG_downsample")


def ecsmp_want_file(rel: str) -> bool:
    """ECSMP needs only ``scale.xlsx`` (root), ``E4/**/BVP.csv`` and everything under ``EEG_downsample/``."""
    if rel == "scale.xlsx" or _under(rel, "EEG_downsample"):
        return True
    return _under(rel, "E4") and rel.endswith("/BVP.csv")


#: Dataset key -> the code-valued fields of its source declaration.
STEPS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "bidmc": {"select": bidmc_select},
    "butppg": {"select": butppg_select},
    "dreamt": {"select": dreamt_select},
    "ecsmp": {"want_folder": ecsmp_want_folder, "want_file": ecsmp_want_file},
}
