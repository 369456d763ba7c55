"""``references.bib`` and the methods sentence of a report: exactly the benchmark, datasets and models it used.

Names come from records anyone can write, so ``methods.tex`` (meant for a paper) LaTeX-escapes every one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.cards.bibtex import BENCHMARK, render_all
from ppgbench_pl.cards.citations import dataset_citation, model_citation, references
from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.cards.types import Citation
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report.load import order_models, order_tasks
from ppgbench_pl.report.tables import latex_escape

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
    paragraph: str  # LaTeX, as methods.tex holds it
    text: str  # the same sentence as plain text, citations as [key]
    written: list[Path] = field(default_factory=list)


def used(records: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(datasets, models) of a set of records, in the report's task and model order."""
    records = list(records)
    datasets = list(dict.fromkeys(dataset_of(t) for t in order_tasks({str(r["task"]) for r in records})))
    models = [m for m in order_models({str(r["model"]) for r in records}) if not is_baseline(m)]
    return datasets, models


def methods_sentence(datasets: Sequence[str], models: Sequence[str], name: Callable[[str], str],
                     cite: Callable[[str], str]) -> str:
    """The sentence citing the benchmark, the datasets and the models (``name`` and ``cite`` render them)."""
    def named(items: Sequence[str], lookup: Callable[[str], Citation | None]) -> str:
        parts = [name(item) + (cite(c.key) if (c := lookup(item)) is not None else "") for item in items]
        return ", ".join(parts) or "none"

    return (f"Models were evaluated with ppgbench{cite(BENCHMARK.key)} ({name(BENCHMARK.field('version'))}) "
            f"on {named(datasets, dataset_citation)}. Models: {named(models, model_citation)}.")


def latex_sentence(datasets: Sequence[str], models: Sequence[str]) -> str:
    r""":func:`methods_sentence` for ``methods.tex``: names escaped, ``~\cite{key}``."""
    return methods_sentence(datasets, models, latex_escape, lambda key: f"~\\cite{{{key}}}")


def text_sentence(datasets: Sequence[str], models: Sequence[str]) -> str:
    """:func:`methods_sentence` for the page: plain names, ``[key]``."""
    return methods_sentence(datasets, models, str, lambda key: f" [{key}]")


def write(out: Path, records: Iterable[dict[str, Any]]) -> References:
    """Write ``references.bib`` and ``methods.tex`` (atomically) into the report folder."""
    from ppgbench_pl.atomic_io import write_text_atomic

    datasets, models = used(records)
    citations = references(datasets, models)
    result = References(datasets, models, [c.key for c in citations], latex_sentence(datasets, models),
                        text_sentence(datasets, models))
    for name, text in ((BIB_FILE, render_all(citations)), (METHODS_FILE, result.paragraph + "\n")):
        write_text_atomic(out / name, text)
        result.written.append(out / name)
    return result


def draw(page: Page, refs: References) -> None:
    """The methods sentence (plain text; the LaTeX is in ``methods.tex``) and where the BibTeX is."""
    page.heading("Citing these results", anchor="cite")
    page.paragraph(refs.text)
    page.paragraph(f"The same sentence for LaTeX, with citation commands: {METHODS_FILE}; its BibTeX entries: "
                   f"{BIB_FILE}.", "note")
