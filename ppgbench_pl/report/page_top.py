"""The top of the report page (a smoke or off-protocol run says so in its title and first paragraph) and citing.

Names in ``methods.tex`` (meant for a paper) come from records anyone can write: each one is LaTeX-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ppgbench_pl.cards.bibtex import BENCHMARK, render_all
from ppgbench_pl.cards.citations import dataset_citation, model_citation, references
from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.cards.types import Citation
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report.folder import Page, table
from ppgbench_pl.report.load import ReportError, RunSet, order_models, order_tasks, skipped_tasks
from ppgbench_pl.report.scores import Scores
from ppgbench_pl.report.tables import budget_note, deviation_note, latex_escape

if TYPE_CHECKING:
    from ppgbench_pl.report.folder import Page


TITLE = "ppgbench report"
PROTOCOL_DOC = "protocol.md"
DECISIONS_DOC = "docs/protocol_decisions.md"
NOT_EVALUABLE = "not_evaluable"


def off_protocol(cells: pd.DataFrame) -> tuple[str, str]:
    """(title, warning) of a report: ``SMOKE`` or ``NOT THE PUBLISHED PROTOCOL`` when any score is off it."""
    if cells.empty:
        return TITLE, ""
    scores = cells[~cells["model"].map(is_baseline)]
    budgets = scores["budget"].fillna("published").astype(str).str.split(";")  # a cell may join several
    off = scores[budgets.map(lambda names: set(names) != {"published"}) | (scores["deviations"].astype(str) != "")]
    if off.empty:
        return TITLE, ""
    smoke = any("smoke" in names for names in budgets[off.index])
    kind = "SMOKE (not the published protocol)" if smoke else "NOT THE PUBLISHED PROTOCOL"
    share = "all scores" if len(off) == len(scores) else f"{len(off)} of {len(scores)} scores"
    return f"{TITLE}: {kind}", f"{budget_note(off)}{deviation_note(off)}({share} of this report)"


def not_evaluable(runs: RunSet) -> list[dict[str, Any]]:
    """Records of jobs that were settled as not evaluable (no training; not a failure)."""
    return [r for r in runs.failed if r.get("status") == NOT_EVALUABLE]


def failed(runs: RunSet) -> list[dict[str, Any]]:
    """Records of jobs that failed (and have no completed record elsewhere)."""
    return [r for r in runs.failed if r.get("status") != NOT_EVALUABLE]


def copy_protocol(out: Path) -> Path:
    """Copy the protocol shipped with the package next to the page, so the report's link works offline."""
    from importlib import resources

    target = out / PROTOCOL_DOC
    source = resources.files("ppgbench_pl") / "docs" / PROTOCOL_DOC
    try:
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{source}: the protocol document shipped with ppgbench cannot be read ({exc}); "
                          "reinstall the package") from None
    return target


def code_version_line(runs: RunSet) -> str | None:
    """Say that a run was made by more than one code version; None when it was not."""
    counts = runs.code_versions
    labels = set(counts) | set(runs.run_code_versions)
    if len(labels) <= 1:
        return None
    parts = [f"{label or 'unrecorded'} ({counts.get(label, 0)} jobs)" for label in sorted(labels)]
    return (f"These results were made by {len(labels)} code versions: {', '.join(parts)}; cells mixing "
            "them are flagged v in the tables.")


def header(page: Page, runs: RunSet, scores: Scores, warning: str, ci_unit: str) -> None:
    """The first paragraph (the off-protocol warning, when there is one), then what the report is made of."""
    if warning:
        page.paragraph(warning, "warning")
    folders = ", ".join(str(d) for d in runs.run_dirs)
    models = [m for m in scores.models if not is_baseline(m)]
    planned = f" of {len(runs.planned)} planned" if runs.planned else ""
    settled = len(not_evaluable(runs))
    evaluable = f", {settled} not evaluable (recorded without training)" if settled else ""
    page.paragraph(f"Run folders: {folders}. {len(runs.records)} completed jobs{planned}{evaluable}, "
                   f"{len(failed(runs))} failed; {len(models)} models, {len(scores.regimes)} regime(s). Scores: mean "
                   f"± Student-t 95% CI over {ci_unit} means (protocol section 9).", "meta")
    page.raw(f'<p class="meta">Protocol: <a href="{PROTOCOL_DOC}">the protocol these numbers follow</a> (shipped '
             f"with ppgbench as ppgbench_pl/docs/{PROTOCOL_DOC}; where and why we differ from the published "
             f"protocol: {DECISIONS_DOC} in the ppgbench source).</p>")
    versions = code_version_line(runs)
    if versions:
        page.paragraph(versions, "warning")
    tasks = [f"{t}: {why}" for t, why in skipped_tasks(runs.run_dirs).items()]
    for items, what in ((runs.skipped, "files were skipped (unreadable or missing)"),
                        (tasks, "tasks were skipped: they cannot be evaluated from the data there was"),
                        (runs.conflicts, "jobs had conflicting records across folders (first folder kept)")):
        if items:
            page.details(f"{len(items)} {what}", "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items)
                         + "</ul>")


def job_lists(page: Page, runs: RunSet) -> None:
    """The jobs that did not give a score: not evaluable (settled), then failed (they run again)."""
    for title, anchor, column, records in (("Jobs not evaluable", "not_evaluable", "reason", not_evaluable(runs)),
                                           ("Failed jobs", "failed", "error", failed(runs))):
        if records:
            page.heading(title, anchor=anchor)
            rows = pd.DataFrame([{"job": r.get("job_id", ""), column: r.get("error", "")} for r in records])
            page.raw(table(rows, text_columns=(column,)))


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


def methods_sentence(datasets: Sequence[str], models: Sequence[str], name: Callable[[str], str],
                     cite: Callable[[str], str]) -> str:
    """The sentence citing the benchmark, the datasets and the models (``name`` and ``cite`` render them)."""
    def named(items: Sequence[str], lookup: Callable[[str], Citation | None]) -> str:
        parts = [name(item) + (cite(c.key) if (c := lookup(item)) is not None else "") for item in items]
        return ", ".join(parts) or "none"

    return (f"Models were evaluated with ppgbench{cite(BENCHMARK.key)} ({name(BENCHMARK.field('version'))}) "
            f"on {named(datasets, dataset_citation)}. Models: {named(models, model_citation)}.")


def write_references(out: Path, records: Iterable[dict[str, Any]]) -> References:
    r"""Write ``references.bib`` and ``methods.tex`` (atomically; names LaTeX-escaped, ``~\cite{key}``)."""
    from ppgbench_pl.atomic_io import write_text_atomic

    records = list(records)
    datasets = list(dict.fromkeys(dataset_of(t) for t in order_tasks({str(r["task"]) for r in records})))
    models = [m for m in order_models({str(r["model"]) for r in records}) if not is_baseline(m)]
    citations = references(datasets, models)
    result = References(datasets, models, [c.key for c in citations],
                        methods_sentence(datasets, models, latex_escape, lambda key: f"~\\cite{{{key}}}"),
                        methods_sentence(datasets, models, str, lambda key: f" [{key}]"))
    for name, text in ((BIB_FILE, render_all(citations)), (METHODS_FILE, result.paragraph + "\n")):
        write_text_atomic(out / name, text)
        result.written.append(out / name)
    return result


def draw_references(page: Page, refs: References) -> None:
    """The methods sentence (plain text; the LaTeX is in ``methods.tex``) and where the BibTeX is."""
    page.heading("Citing these results", anchor="cite")
    page.paragraph(refs.text)
    page.paragraph(f"The same sentence for LaTeX, with citation commands: {METHODS_FILE}; its BibTeX entries: "
                   f"{BIB_FILE}.", "note")
