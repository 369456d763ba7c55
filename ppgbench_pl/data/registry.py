"""The datasets and tasks, from their declarations in ``datasets.json``; light: imports no numpy, pandas or torch."""

from __future__ import annotations

import csv
import difflib
import importlib
import json
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.cards.types import Citation, DatasetCard
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, Source, TaskSpec
from ppgbench_pl.errors import ConfigError, DownloadError

if TYPE_CHECKING:  # the download machinery and the preprocessors stay out of this light import
    from ppgbench_pl.data.datasets.base import RawDataset
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
    names = {urllib.parse.unquote(href.split("?")[0]).rsplit("/", 1)[-1] for href in _HREF.findall(html)}
    return sorted(name for name in names if _DREAMT_FILE.fullmatch(name))


def dreamt_select(tree: Job) -> None:
    """Scrape the ``data_64Hz/`` listing for ``S###_whole_df.csv`` and fetch each file."""
    names = listed_files(tree.client.get_text(tree.url(DREAMT_LISTING)) or "")
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


def _tuples(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()}


def _declaration(key: str, entry: dict[str, Any]) -> DatasetDeclaration:
    tasks = tuple(TaskSpec(dataset=key, **_tuples(task)) for task in entry["tasks"])
    source: dict[str, Any] = {**entry.get("source", {}), **STEPS.get(key, {})}
    spec = Source(**source) if source else None
    return DatasetDeclaration(DatasetInfo(key=key, **entry["info"]), tasks, spec)


def _card(entry: dict[str, Any]) -> DatasetCard:
    paper = entry["paper"]
    citation = Citation(paper["key"], paper["entry_type"], tuple(paper["fields"].items()),
                        tuple(paper.get("unconfirmed", ())))
    return DatasetCard(paper=citation, **_tuples({k: v for k, v in entry.items() if k != "paper"}))


_DECLARED: dict[str, Any] = json.loads(Path(__file__).with_name("datasets.json").read_text(encoding="utf-8"))
#: Every declared dataset, in registry order: the built-in synthetic one, then PROTOCOL.md 1.0's order.
DATASET_KEYS: tuple[str, ...] = tuple(_DECLARED)
DECLARATIONS: dict[str, DatasetDeclaration] = {key: _declaration(key, entry) for key, entry in _DECLARED.items()}
DATASETS: dict[str, DatasetInfo] = {key: d.info for key, d in DECLARATIONS.items()}
TASKS: dict[str, TaskSpec] = {t.name: t for d in DECLARATIONS.values() for t in d.tasks}
#: Download sources of the datasets that have one (all but the generated ones).
SOURCES: dict[str, Source] = {key: d.source for key, d in DECLARATIONS.items() if d.source is not None}
#: The downloadable benchmark datasets (every declared dataset except the generated ones).
REAL_DATASETS: tuple[str, ...] = tuple(SOURCES)
#: Dataset key -> its card (paper, publisher, licence, provenance).
CARDS: dict[str, DatasetCard] = {key: _card(e["card"]) for key, e in _DECLARED.items() if "card" in e}


def _known(kind: str, name: str, known: list[str]) -> str:
    """``name`` when it is in ``known``; else a one-line ConfigError with close matches."""
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
        raise ConfigError(f"unknown {kind} '{name}'{hint}")
    return name


def get_dataset(key: str) -> DatasetInfo:
    """Look up a dataset by key, with a one-line error and suggestions when unknown."""
    return DATASETS[_known("dataset", key, list(DATASETS))]


def preprocessor(key: str) -> type[RawDataset]:
    """The preprocessor class a dataset's declaration names (any declared dataset, synthetic included)."""
    info = DATASETS.get(key)
    if info is None or not info.preprocessor:
        raise ConfigError(f"no preprocessor for dataset '{key}'; known: {', '.join(REAL_DATASETS)}")
    module, _, attr = info.preprocessor.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def get_task(name: str) -> TaskSpec:
    """Look up a task by name, with a one-line error and suggestions when unknown."""
    return TASKS[_known("task", name, list(TASKS))]


def tasks_of(dataset: str) -> list[TaskSpec]:
    """All tasks defined on one dataset, in registry order (unknown dataset: as :func:`get_dataset`)."""
    return list(DECLARATIONS[get_dataset(dataset).key].tasks)


def select_tasks(
    dataset: str | None = None, tier: str | None = None, kind: str | None = None
) -> list[TaskSpec]:
    """Tasks in registry order, filtered by dataset, tier and kind (each validated, one-line errors)."""
    if tier is not None:
        _known("tier", tier, ["primary", "secondary"])
    if kind is not None:
        _known("task kind", kind, ["regression", "classification", "regression_cls"])
    tasks = tasks_of(dataset) if dataset is not None else list(TASKS.values())
    return [t for t in tasks if (tier is None or t.tier == tier) and (kind is None or t.kind == kind)]
