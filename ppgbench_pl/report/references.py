"""``references.bib`` and the methods sentence of a report: exactly the benchmark, datasets and models it used.

The datasets are those of the tasks in the records, the models those with a record (baselines are not
models); both in the report's order. The same entries come out of ``ppgbench cite --datasets ...
--models ...`` (:mod:`ppgbench_pl.cards.citations`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.cards.bibtex import render_all
from ppgbench_pl.cards.citations import methods_paragraph, references
from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.report.load import order_models, order_tasks
from ppgbench_pl.results.fold_entry import is_baseline

if TYPE_CHECKING:
    from ppgbench_pl.report.html import Page

BIB_FILE = "references.bib"
METHODS_FILE = "methods.tex"


@dataclass
class References:
    """What a report cites, the sentence that cites it, and the files written."""

    datasets: list[str]
    models: list[str]
    keys: list[str]
    paragraph: str
    written: list[Path] = field(default_factory=list)


def used(records: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(datasets, models) of a set of records, in the report's task and model order."""
    records = list(records)
    datasets = list(dict.fromkeys(dataset_of(t) for t in order_tasks({str(r["task"]) for r in records})))
    models = [m for m in order_models({str(r["model"]) for r in records}) if not is_baseline(m)]
    return datasets, models


def write(out: Path, records: Iterable[dict[str, Any]]) -> References:
    """Write ``references.bib`` and ``methods.tex`` (atomically) into the report folder."""
    from ppgbench_pl.atomic_io import write_text_atomic

    datasets, models = used(records)
    citations = references(datasets, models)
    result = References(datasets, models, [c.key for c in citations], methods_paragraph(datasets, models))
    for name, text in ((BIB_FILE, render_all(citations)), (METHODS_FILE, result.paragraph + "\n")):
        write_text_atomic(out / name, text)
        result.written.append(out / name)
    return result


def draw(page: Page, refs: References) -> None:
    """The methods sentence and where the BibTeX is."""
    page.paragraph(f"Methods (LaTeX, {METHODS_FILE}; entries in {BIB_FILE}): {refs.paragraph}", "meta")
