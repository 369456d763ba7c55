"""The top of the report page: a title and first paragraph that say what kind of run this is, then the facts.

A smoke or off-protocol run says so in the title and first paragraph, so nobody reads its numbers as published.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report.html import Page, table
from ppgbench_pl.report.load import ReportError, RunSet, skipped_tasks
from ppgbench_pl.report.scores import Scores
from ppgbench_pl.report.tables import budget_note, deviation_note

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


def _counts(runs: RunSet) -> str:
    planned = f" of {len(runs.planned)} planned" if runs.planned else ""
    settled = len(not_evaluable(runs))
    evaluable = f", {settled} not evaluable (recorded without training)" if settled else ""
    return f"{len(runs.records)} completed jobs{planned}{evaluable}, {len(failed(runs))} failed"


def header(page: Page, runs: RunSet, scores: Scores, warning: str, ci_unit: str) -> None:
    """The first paragraph (the off-protocol warning, when there is one), then what the report is made of."""
    if warning:
        page.paragraph(warning, "warning")
    folders = ", ".join(str(d) for d in runs.run_dirs)
    models = [m for m in scores.models if not is_baseline(m)]
    page.paragraph(f"Run folders: {folders}. {_counts(runs)}; {len(models)} models, {len(scores.regimes)} "
                   f"regime(s). Scores: mean ± Student-t 95% CI over {ci_unit} means (protocol section 9).",
                   "meta")
    page.link_paragraph("Protocol: ", PROTOCOL_DOC, "the protocol these numbers follow",
                        f" (shipped with ppgbench as ppgbench_pl/docs/{PROTOCOL_DOC}; where and why we "
                        f"differ from the published protocol: {DECISIONS_DOC} in the ppgbench source).")
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
