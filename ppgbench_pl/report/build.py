"""Build the whole report from run folders (layout: docs/report.md), beside ``<output>`` and swapped in whole.

The page reads top down: what the run is, the headline findings, the main tables, details.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report import (
    analyses,
    findings,
    page_top,
    search_noise,
    sections,
    tables,
    verdicts,
)
from ppgbench_pl.report.compare import Rule
from ppgbench_pl.report.folder import Page, staged, table
from ppgbench_pl.report.load import ReportError, RunSet, load_runs
from ppgbench_pl.report.scores import Scores
from ppgbench_pl.report.sections import ReportOptions, write_csv
from ppgbench_pl.report.two_level_rows import check_interval

#: Regimes that search hyperparameters with Optuna and can repeat the search (``search_seeds``).
SEARCHED_REGIMES = ("mlp", "finetune")


def _summary(page: Page, head: findings.Headline, out: Path, runs: RunSet) -> None:
    lines = head.lines()
    versions = page_top.code_version_line(runs)
    if versions:
        lines.append(versions)
    if runs.problems:
        lines.append(f"{len(runs.problems)} job records could not be read and count as not run (listed in "
                     "the report).")
    if runs.prediction_problems:
        lines.append(f"{len(runs.prediction_problems)} prediction files are missing or unreadable and are "
                     "left out of the rescoring table (listed in the report).")
    page.heading("Headline findings", anchor="findings")
    page.bullets(lines, "findings")
    text = ["# Headline findings", "", *[f"- {line}" for line in lines]]
    for what, cells in (("Near-chance cells", head.near_chance), ("Cells where the controls hold", head.controls_hold)):
        text += ["", f"{what}: {'; '.join(f'{task} ({regime})' for task, regime in cells) or 'none'}"]
    (out / "findings.md").write_text("\n".join(text) + "\n", encoding="utf-8")


def _details(page: Page, head: findings.Headline, chance: pd.DataFrame, controls: pd.DataFrame,
             scores: Scores, out: Path, opts: ReportOptions) -> None:
    page.heading("Findings in detail", anchor="details")
    page.details(f"Cells near chance: {len(head.near_chance)}",
                 table(*findings.marked(chance, opts.flags, "Per cell: constant baseline, best model, "
                                                                 "models that beat the baseline."),
                       text_columns=("beat_baseline",)))
    page.details(f"Cells where no PPG-specific model beats the PRV and MOMENT controls: "
                 f"{len(head.controls_hold)}",
                 table(controls, "Controls present per cell and the PPG-specific models beating all of them.",
                       text_columns=("ppg_models", "controls", "winners")))
    if opts.overlap_findings is not None:
        findings.draw(page, opts.overlap_findings)
        findings.append_section(out / "findings.md", "Pretraining overlap", opts.overlap_findings.lines)
    if opts.paired_findings is not None:
        verdicts.draw(page, opts.paired_findings, opts.flags)
        findings.append_section(out / "findings.md", verdicts.TITLE, opts.paired_findings.lines)
    noise = opts.search_noise
    if noise is not None and (not noise.noise.empty or set(SEARCHED_REGIMES) & set(scores.regimes)):
        search_noise.draw(page, noise)
        findings.append_section(out / "findings.md", "Search noise", noise.lines)


def _write_page(out: Path, runs: RunSet, scores: Scores, rule: Rule, head: findings.Headline,
                chance: pd.DataFrame, controls: pd.DataFrame, opts: ReportOptions) -> Path:
    cells = tables.main_cells(scores, rule, chance)
    title, warning = page_top.off_protocol(cells)
    page = Page(title, out)
    protocol = page_top.copy_protocol(out)
    opts.flags = findings.cell_flags(runs.records)
    opts.jobs = analyses.rescore_jobs(runs)  # before the header: it notes missing prediction files
    page_top.header(page, runs, scores, warning, opts.ci_unit)
    _summary(page, head, out, runs)
    sections.main_tables(page, scores, rule, cells, out, opts)
    _details(page, head, chance, controls, scores, out, opts)
    sections.comparisons(page, scores, out, opts)
    sections.paper_analyses(page, runs, out, opts)
    page_top.job_lists(page, runs)
    if opts.citations is not None:
        page_top.draw_references(page, opts.citations)
    page.heading("Files", anchor="files")
    page.links([out / "findings.md", protocol, *opts.written])
    return page.write()


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
    opts = ReportOptions(rule, alpha, ci_unit, pairs, Path(parameters) if parameters else None)
    the_rule = Rule(rule, alpha)
    runs = load_runs(run_dirs)
    scores = Scores(runs.records, ci_unit)
    known = set(scores.models) | ({BASELINE_MODEL} if any(is_baseline(m) for m in scores.models) else set())
    unknown = sorted({m for pair in pairs or () for m in pair} - known)
    if unknown:  # rather than an empty comparison
        raise ReportError(f"--compare names unknown model(s) {', '.join(unknown)}; "
                          f"these runs have {', '.join(scores.models)}")
    with staged(output_dir) as out:
        chance = findings.chance_cells(scores, the_rule)
        controls = findings.control_cells(scores, the_rule)
        write_csv(chance, out / "tables" / "chance_cells.csv", opts)
        write_csv(controls, out / "tables" / "control_cells.csv", opts)
        head = findings.headline(chance, controls, the_rule)
        opts.paired_findings = verdicts.compute(runs.records, chance, controls, out, alpha, subject_interval,
                                                    runs)
        opts.search_noise = search_noise.compute(runs.records, out, alpha, ci_unit)
        opts.written += opts.paired_findings.written + opts.search_noise.written
        opts.overlap_findings = findings.compute(scores, runs.records, the_rule, out)
        opts.citations = page_top.write_references(out, runs.records)
        opts.written += opts.overlap_findings.written + opts.citations.written
        _write_page(out, runs, scores, the_rule, head, chance, controls, opts)
    if warn is not None:
        for line in runs.skipped:
            warn(line)
    return Path(output_dir) / "index.html"
