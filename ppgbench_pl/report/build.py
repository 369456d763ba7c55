"""Build the whole report from run folders (layout: docs/report.md), beside ``<output>`` and swapped in whole.

The page reads top down: what the run is, the headline findings, the main tables, details.
A smoke or off-protocol run says so in the page's title and first paragraph; names in methods.tex (meant for a
paper) come from records anyone can write, so each one is LaTeX-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.cards.bibtex import BENCHMARK, render_all
from ppgbench_pl.cards.citations import dataset_citation, model_citation, references
from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.cards.types import Citation
from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report import analyses, findings, search_noise, sections, tables, verdicts
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.folder import Page, staged, table
from ppgbench_pl.report.load import ReportError, RunSet, load_runs, order_models, order_tasks, skipped_tasks
from ppgbench_pl.report.sections import ReportOptions, write_csv
from ppgbench_pl.report.tables import budget_note, deviation_note, latex_escape
from ppgbench_pl.report.two_level_rows import check_interval
from ppgbench_pl.results.folder_sync import NOT_EVALUABLE

#: Regimes that search hyperparameters with Optuna and can repeat the search (``search_seeds``).
SEARCHED_REGIMES = ("mlp", "finetune")


def _summary(page: Page, head: findings.Headline, out: Path, runs: RunSet) -> None:
    lines = head.lines()
    if versions := code_version_line(runs):
        lines.append(versions)
    if runs.problems:
        lines.append(f"{len(runs.problems)} job records could not be read and count as not run (listed in the report).")
    if runs.prediction_problems:
        lines.append(f"{len(runs.prediction_problems)} prediction files are missing or unreadable and are "
                     "left out of the rescoring table (listed in the report).")
    page.heading("Headline findings", anchor="findings")
    page.bullets(lines, "findings")
    text = ["# Headline findings", "", *[f"- {line}" for line in lines]]
    for what, cells in (("Near-chance cells", head.near_chance), ("Cells where the controls hold", head.controls_hold)):
        text += ["", f"{what}: {'; '.join(f'{task} ({regime})' for task, regime in cells) or 'none'}"]
    (out / "findings.md").write_text("\n".join(text) + "\n", encoding="utf-8")


def _details(page: Page, head: findings.Headline, chance: pd.DataFrame, controls: pd.DataFrame, scores: Scores,
             out: Path, opts: ReportOptions, overlap: findings.OverlapFindings, paired: verdicts.PairedFindings,
             noise: search_noise.SearchNoise) -> None:
    page.heading("Findings in detail", anchor="details")
    page.details(f"Cells near chance: {len(head.near_chance)}",
                 table(*findings.marked(chance, opts.flags, "Per cell: constant baseline, best model, "
                                                                 "models that beat the baseline."),
                       text_columns=("beat_baseline",)))
    page.details(f"Cells where no PPG-specific model beats the PRV and MOMENT controls: "
                 f"{len(head.controls_hold)}",
                 table(controls, "Controls present per cell and the PPG-specific models beating all of them.",
                       text_columns=("ppg_models", "controls", "winners")))
    findings.draw(page, overlap)
    findings.append_section(out / "findings.md", "Pretraining overlap", overlap.lines)
    verdicts.draw(page, paired, opts.flags)
    findings.append_section(out / "findings.md", verdicts.TITLE, paired.lines)
    if not noise.noise.empty or set(SEARCHED_REGIMES) & set(scores.regimes):
        search_noise.draw(page, noise)
        findings.append_section(out / "findings.md", "Search noise", noise.lines)


def _write_page(out: Path, runs: RunSet, scores: Scores, rule: Rule, opts: ReportOptions, interval: str) -> None:
    chance = write_csv(findings.chance_cells(scores, rule), out / "tables" / "chance_cells.csv", opts)
    controls = write_csv(findings.control_cells(scores, rule), out / "tables" / "control_cells.csv", opts)
    paired = verdicts.compute(runs.records, chance, controls, out, opts.alpha, interval, runs)
    noise = search_noise.compute(runs.records, out, opts.alpha, opts.ci_unit)
    overlap = findings.compute(scores, runs.records, rule, out)
    citations = write_references(out, runs.records)
    opts.written += paired.written + noise.written + overlap.written + citations.written
    head = findings.headline(chance, controls, rule)
    cells = tables.main_cells(scores, rule, chance)
    title, warning = off_protocol(cells)
    page = Page(title, out)
    protocol, source = out / PROTOCOL_DOC, resources.files("ppgbench_pl") / "docs" / PROTOCOL_DOC
    try:  # the protocol shipped with the package, beside the page, so the report's link works offline
        protocol.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{source}: the protocol document shipped with ppgbench cannot be read ({exc}); "
                          "reinstall the package") from None
    opts.flags = findings.cell_flags(runs.records)
    opts.jobs = analyses.rescore_jobs(runs)  # before the header: it notes missing prediction files
    header(page, runs, scores, warning, opts.ci_unit)
    _summary(page, head, out, runs)
    sections.main_tables(page, scores, rule, cells, out, opts)
    _details(page, head, chance, controls, scores, out, opts, overlap, paired, noise)
    sections.comparisons(page, scores, out, opts)
    sections.paper_analyses(page, runs, out, opts)
    job_lists(page, runs)
    page.heading("Citing these results", anchor="cite")  # the methods sentence as plain text; LaTeX: methods.tex
    page.paragraph(citations.text)
    page.paragraph(f"The same sentence for LaTeX, with citation commands: {METHODS_FILE}; its BibTeX entries: "
                   f"{BIB_FILE}.", "note")
    page.heading("Files", anchor="files")
    names = [html.escape(p.relative_to(out).as_posix()) for p in [out / "findings.md", protocol, *opts.written]]
    page.raw("<ul>" + "".join(f'<li><a href="{name}">{name}</a></li>' for name in names) + "</ul>")
    page.write()


def build_report(run_dirs: Sequence[str | Path], output_dir: str | Path, rule: str = "ci",
                 alpha: float = 0.05, ci_unit: str = "seed", pairs: Sequence[tuple[str, str]] | None = None,
                 parameters: str | Path | None = None, warn: Callable[[str], None] | None = None,
                 subject_interval: str = "two-level") -> Path:
    """Write the report of one or more run folders and return the path of its ``index.html``.

    Args:
        run_dirs: Run folders or exported files; several combine (first wins on conflicts).
        output_dir: Report folder: created, or replaced whole when it holds an older report.
        rule: "Meaningfully better" rule for chance and controls (``ci``, ``paired``, ``mean``).
        alpha: Level of the paired rule and of the Nemenyi critical difference.
        ci_unit: ``seed`` (published) or ``fold``.
        pairs: Model pairs to compare (default: each tested model vs each control).
        parameters: Optional parameter-count file for Table 7.
        warn: Called with one line per file that was skipped (also listed on the page).
        subject_interval: ``two-level`` (default), ``corrected-t`` or ``bootstrap``: the paired effects' interval.

    Raises:
        ReportError: No usable records, an unknown rule or CI unit, a bad parameter file, or a report
            folder that cannot be written; the folder given is then left as it was.

    """
    if ci_unit not in ("seed", "fold"):
        raise ReportError(f"unknown CI unit '{ci_unit}'; choose seed or fold")
    check_interval(subject_interval)
    opts = ReportOptions(alpha, ci_unit, pairs, Path(parameters) if parameters else None)
    the_rule = Rule(rule, alpha)
    runs = load_runs(run_dirs)
    scores = Scores(runs.records, ci_unit)
    known = set(scores.models) | ({BASELINE_MODEL} if any(is_baseline(m) for m in scores.models) else set())
    unknown = sorted({m for pair in pairs or () for m in pair} - known)
    if unknown:  # rather than an empty comparison
        raise ReportError(f"--compare names unknown model(s) {', '.join(unknown)}; "
                          f"these runs have {', '.join(scores.models)}")
    with staged(output_dir) as out:
        _write_page(out, runs, scores, the_rule, opts, subject_interval)
    if warn is not None:
        for line in runs.skipped:
            warn(line)
    return Path(output_dir) / "index.html"


TITLE = "ppgbench report"
PROTOCOL_DOC = "protocol.md"
DECISIONS_DOC = "docs/protocol_decisions.md"


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


def unfinished(runs: RunSet) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Records of jobs settled as not evaluable (no training; not a failure), and of jobs that failed."""
    settled = [r for r in runs.failed if r.get("status") == NOT_EVALUABLE]
    return settled, [r for r in runs.failed if r.get("status") != NOT_EVALUABLE]


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
    settled, failed = map(len, unfinished(runs))
    evaluable = f", {settled} not evaluable (recorded without training)" if settled else ""
    page.paragraph(f"Run folders: {folders}. {len(runs.records)} completed jobs{planned}{evaluable}, "
                   f"{failed} failed; {len(models)} models, {len(scores.regimes)} regime(s). Scores: mean "
                   f"± Student-t 95% CI over {ci_unit} means (protocol section 9).", "meta")
    page.raw(f'<p class="meta">Protocol: <a href="{PROTOCOL_DOC}">the protocol these numbers follow</a> (shipped '
             f"with ppgbench as ppgbench_pl/docs/{PROTOCOL_DOC}; where and why we differ from the published "
             f"protocol: {DECISIONS_DOC} in the ppgbench source).</p>")
    if versions := code_version_line(runs):
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
    for (title, anchor, column), records in zip((("Jobs not evaluable", "not_evaluable", "reason"),
                                                 ("Failed jobs", "failed", "error")), unfinished(runs), strict=True):
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
