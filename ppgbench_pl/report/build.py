"""Build the whole report from run folders: tables, findings, analyses, comparisons, figures, index.html.

Output layout (``<output>/``)::

    index.html                        everything below, readable offline
    findings.md                       the headline findings and the cells behind them
    tables/main_<regime>.csv|md|tex   the main tables; main_cells.csv holds their numbers and flags
    tables/chance_cells.csv, control_cells.csv, aggregation_frequency.csv, rescoring.csv,
    tables/edge_pressure.csv, parameters.csv, paired.csv, ranking.csv (+ per-job detail CSVs)
    figures/regime_comparison.png|svg, figures/cd_<regime>.png|svg
    protocol.md                       the protocol the numbers follow (a copy of ppgbench_pl/docs/protocol.md)
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ppgbench_pl.report import (
    analyses,
    compare,
    effects_page,
    figures,
    findings,
    overlap_marks,
    overlap_page,
    references,
    rescoring,
    search_noise,
    tables,
)
from ppgbench_pl.report.html import Page, table
from ppgbench_pl.report.load import ReportError, RunSet, load_runs, skipped_tasks
from ppgbench_pl.report.rules import Rule
from ppgbench_pl.report.scores import Scores
from ppgbench_pl.report.subject_interval import check_interval
from ppgbench_pl.results.fold_entry import BASELINE_MODEL, is_baseline

PROTOCOL_DOC = "protocol.md"
DECISIONS_DOC = "docs/protocol_decisions.md"


@dataclass
class ReportOptions:
    """Choices that change what the report says.

    Args:
        rule: "Meaningfully better" rule: ``ci`` (default), ``paired`` or ``mean``.
        alpha: Significance level of the ``paired`` rule and of the Nemenyi CD.
        ci_unit: ``seed`` (published) or ``fold``, as in summary.csv.
        pairs: Model pairs for paired comparisons (default: each tested model vs each control).
        parameters: Optional parameter-count file (CSV or JSON) for Table 7.

    """

    rule: str = "ci"
    alpha: float = 0.05
    ci_unit: str = "seed"
    pairs: Sequence[tuple[str, str]] | None = None
    parameters: Path | None = None
    written: list[Path] = field(default_factory=list)
    paired_findings: effects_page.PairedFindings | None = None  # issue 19: paired tests beside the published rule
    overlap_findings: overlap_page.OverlapFindings | None = None  # issue 21: counts and findings without overlap
    citations: references.References | None = None  # issue 21: references.bib and the methods sentence
    flags: dict[tuple[str, str], str] = field(default_factory=dict)  # issue 21: (task, model) -> overlap
    search_noise: search_noise.SearchNoise | None = None  # issue 19: what other search seeds add


def _csv(frame: pd.DataFrame, path: Path, opts: ReportOptions) -> None:
    frame.to_csv(path, index=False)
    opts.written.append(path)


def _cells_list(cells: list[tuple[str, str]]) -> str:
    return "; ".join(f"{task} ({regime})" for task, regime in cells) or "none"


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


def _header(page: Page, runs: RunSet, scores: Scores, opts: ReportOptions) -> None:
    done = len(runs.records)
    planned = f" of {len(runs.planned)} planned" if runs.planned else ""
    folders = ", ".join(str(d) for d in runs.run_dirs)
    models = [m for m in scores.models if not is_baseline(m)]
    page.paragraph(f"Run folders: {folders}. {done} completed jobs{planned}, {len(runs.failed)} failed; "
                   f"{len(models)} models, {len(scores.regimes)} regime(s). "
                   f"Scores: mean ± Student-t 95% CI over {opts.ci_unit} means (protocol section 9).", "meta")
    page.link_paragraph("Protocol: ", PROTOCOL_DOC, "the protocol these numbers follow",
                        f" (shipped with ppgbench as ppgbench_pl/docs/{PROTOCOL_DOC}; where and why we "
                        f"differ from the published protocol: {DECISIONS_DOC} in the ppgbench source).")
    versions = code_version_line(runs)
    if versions:
        page.paragraph(versions, "warning")
    if runs.skipped:
        page.details(f"{len(runs.skipped)} files were skipped (unreadable or missing)",
                     "<ul>" + "".join(f"<li>{html.escape(p)}</li>" for p in runs.skipped) + "</ul>")
    if tasks := skipped_tasks(runs.run_dirs):
        page.details(f"{len(tasks)} tasks were skipped: they cannot be evaluated from the data there was",
                     "<ul>" + "".join(f"<li>{html.escape(f'{t}: {why}')}</li>" for t, why in tasks.items()) + "</ul>")
    if runs.conflicts:
        page.details(f"{len(runs.conflicts)} jobs had conflicting records across folders (first folder kept)",
                     "<ul>" + "".join(f"<li>{c}</li>" for c in runs.conflicts) + "</ul>")


def _findings(page: Page, head: findings.Headline, chance: pd.DataFrame, controls: pd.DataFrame,
              out: Path, runs: RunSet) -> None:
    lines = head.lines()
    versions = code_version_line(runs)
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
    page.details(f"Cells near chance: {len(head.near_chance)}",
                 table(*overlap_marks.marked(chance, overlap_marks.cell_flags(runs.records), "Per cell: constant "
                                             "baseline, best model, models that beat the baseline."),
                       text_columns=("beat_baseline",)))
    page.details(f"Cells where no PPG-specific model beats the PRV and MOMENT controls: "
                 f"{len(head.controls_hold)}",
                 table(controls, "Controls present per cell and the PPG-specific models beating all of them.",
                       text_columns=("ppg_models", "controls", "winners")))
    text = ["# Headline findings", "", *[f"- {line}" for line in lines], "",
            f"Near-chance cells: {_cells_list(head.near_chance)}", "",
            f"Cells where the controls hold: {_cells_list(head.controls_hold)}", ""]
    (out / "findings.md").write_text("\n".join(text), encoding="utf-8")


def _main_tables(page: Page, scores: Scores, rule: Rule, chance: pd.DataFrame, out: Path,
                 opts: ReportOptions) -> None:
    cells = tables.main_cells(scores, rule, chance)
    opts.written += tables.write_main_tables(cells, scores, rule, out / "tables")
    page.heading("Main tables", anchor="tables")
    for regime in scores.regimes:
        wide = tables.wide_table(cells, regime, scores.models, scores.tasks(regime),
                                 bold=lambda t: f"<strong>{t}</strong>", marker=lambda m: f" {m}")
        page.heading(regime, level=3)
        page.raw(table(wide, tables.caption(regime, rule, opts.ci_unit, cells), raw=scores.models,
                       row_class=lambda row: "near_chance" if str(row["task"]).endswith("†") else ""))


def _analyses(page: Page, runs: RunSet, out: Path, opts: ReportOptions) -> None:
    page.heading("Subject-level aggregation selected (Table 3)", anchor="aggregation")
    choices = analyses.aggregation_choices(runs.records)
    freq = analyses.aggregation_frequency(choices)
    _csv(freq, out / "tables" / "aggregation_frequency.csv", opts)
    page.raw(table(freq, "Selections (job x repeat) per strategy on subject-level tasks with a choice."))

    page.heading("Subject-level vs window-level scoring of the same predictions (Table 4)",
                 anchor="rescoring")
    jobs = rescoring.rescore_jobs(runs)
    _csv(jobs, out / "tables" / "rescoring_jobs.csv", opts)
    resc = rescoring.rescoring_table(jobs)
    _csv(resc, out / "tables" / "rescoring.csv", opts)
    page.raw(table(*overlap_marks.marked(resc, overlap_marks.cell_flags(runs.records), "Subject level uses the "
                                         "aggregation each job selected; n_mismatched counts rescored values "
                                         "that differ from the recorded metric (should be 0).")))

    page.heading("Edge pressure of the searches (Table 6)", anchor="edges")
    edges = analyses.edge_choices(runs.records)
    _csv(edges, out / "tables" / "edge_choices.csv", opts)
    pressure = analyses.edge_pressure(edges)
    _csv(pressure, out / "tables" / "edge_pressure.csv", opts)
    page.raw(table(pressure, "Fraction of selections at the lowest / highest value seen in the job's own "
                             "search (grid points or Optuna trials; selected epoch vs epochs recorded)."))

    page.heading("Parameters (Table 7)", anchor="parameters")
    counts = dict(runs.parameters)
    if opts.parameters is not None:
        counts.update(analyses.read_parameter_file(opts.parameters))
    params = analyses.parameter_table(counts, runs.models)
    _csv(params, out / "tables" / "parameters.csv", opts)
    if params.empty:
        page.paragraph("No parameter counts in these runs. Pass --parameters FILE (CSV: "
                       "model,total[,trainable], or JSON) to add them.", "note")
    else:
        page.raw(table(params))


def _comparisons(page: Page, scores: Scores, out: Path, opts: ReportOptions) -> None:
    page.heading("Regime comparison (Figure 1)", anchor="regimes")
    fig_dir = out / "figures"
    if scores.tasks():
        png, svg = figures.save(figures.regime_comparison(scores), fig_dir, "regime_comparison")
        opts.written += [png, svg]
        page.figure(png, svg, "Each model's mean ± 95% CI per task under every regime present.")

    page.heading("Ranking across tasks (critical difference)", anchor="ranking")
    few = effects_page.few_seed_regimes(scores)  # no CD diagram without seeds to rank on
    rankings = [r for regime in scores.regimes
                if regime not in few and (r := compare.rank_models(scores, regime, opts.alpha))]
    if few:
        page.paragraph(effects_page.cd_note(few), "note")
    _csv(compare.ranking_table(rankings), out / "tables" / "ranking.csv", opts)
    for r in rankings:
        png, svg = figures.save(figures.cd_diagram(r), fig_dir, f"cd_{r.regime}")
        opts.written += [png, svg]
        dropped = f" Left out for missing tasks: {', '.join(r.dropped_models)}." if r.dropped_models else ""
        page.figure(png, svg, f"{r.regime}: average ranks (1 = best) over {r.n_tasks} tasks; models "
                              f"joined by a bar are not different by the Nemenyi test (alpha {opts.alpha:g})."
                              f"{dropped}")
    if not rankings:
        page.paragraph("A ranking needs at least two models on at least two tasks in one regime.", "note")

    page.heading("Paired comparisons", anchor="paired")
    paired = compare.paired_comparisons(scores, opts.pairs)
    _csv(paired, out / "tables" / "paired.csv", opts)
    page.paragraph(f"Differences model_a - model_b over the same {opts.ci_unit}s and folds: mean with "
                   "Student-t 95% CI, paired t-test and Wilcoxon signed-rank (two-sided). With 5 seeds "
                   "Wilcoxon cannot go below p = 0.0625.", "note")
    if not paired.empty:
        sig = paired[paired["t_pvalue"] < opts.alpha]
        tally = paired.groupby(["regime", "model_a", "model_b"], sort=False).size().rename("cells").to_frame()
        for side in ("a", "b"):
            wins = sig[sig["better"] == sig[f"model_{side}"]].groupby(["regime", "model_a", "model_b"]).size()
            tally[f"{side}_better_p<{opts.alpha:g}"] = wins.reindex(tally.index).fillna(0).astype(int)
        page.raw(table(tally.reset_index(), "Cells where one side is better with a paired t-test p below "
                                            "alpha."))
    page.details(f"All {len(paired)} paired comparisons", table(*overlap_marks.marked(paired, opts.flags)))


def _report_folder(output_dir: str | Path) -> Path:
    """The report folder with its ``tables/`` made, refused up front when it cannot hold a report.

    Raises:
        ReportError: The path is a file, or the folder cannot be created.
    """
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out}: the report folder is a file; choose another --output")
    try:
        (out / "tables").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out}: cannot create the report folder ({exc.strerror or exc})") from None
    return out


def _check_pairs(scores: Scores, pairs: Sequence[tuple[str, str]] | None) -> None:
    """Refuse ``--compare`` pairs naming a model these runs lack, rather than report an empty comparison.

    Raises:
        ReportError: A pair names a model that is neither in the runs nor the constant baseline present.
    """
    known = set(scores.models) | ({BASELINE_MODEL} if any(is_baseline(m) for m in scores.models) else set())
    unknown = sorted({m for pair in pairs or () for m in pair} - known)
    if unknown:
        raise ReportError(f"--compare names unknown model(s) {', '.join(unknown)}; "
                          f"these runs have {', '.join(scores.models)}")


def _write_page(out: Path, runs: RunSet, scores: Scores, rule: Rule, head: findings.Headline,
                chance: pd.DataFrame, controls: pd.DataFrame, opts: ReportOptions) -> Path:
    """Draw every section and write ``index.html``; return its path.

    The tables, comparisons and analyses are drawn before the header and findings but shown after them:
    the analyses read the predictions and note the missing or corrupt files the findings then report.
    """
    page = Page("ppgbench report", out)
    protocol = copy_protocol(out)
    opts.flags = overlap_marks.cell_flags(runs.records)
    _main_tables(page, scores, rule, chance, out, opts)  # drawn first, shown after the findings
    _comparisons(page, scores, out, opts)
    _analyses(page, runs, out, opts)  # reads the predictions: notes missing or corrupt files
    body, page.parts = page.parts[1:], page.parts[:1]
    _header(page, runs, scores, opts)
    if opts.citations is not None:
        references.draw(page, opts.citations)
    _findings(page, head, chance, controls, out, runs)
    if opts.overlap_findings is not None:
        overlap_page.draw(page, opts.overlap_findings)
        overlap_page.append_findings(out / "findings.md", opts.overlap_findings)
    if opts.paired_findings is not None:
        effects_page.draw(page, opts.paired_findings, opts.flags)
        effects_page.append_findings(out / "findings.md", opts.paired_findings)
    if opts.search_noise is not None:
        search_noise.draw(page, opts.search_noise)
        search_noise.append_findings(out / "findings.md", opts.search_noise)
    page.parts += body
    if runs.failed:
        page.heading("Failed jobs", anchor="failed")
        failed = pd.DataFrame([{"job": r.get("job_id", ""), "error": r.get("error", "")}
                               for r in runs.failed])
        page.raw(table(failed, text_columns=("error",)))
    page.heading("Files", anchor="files")
    page.links([out / "findings.md", protocol, *opts.written])
    return page.write()


def build_report(run_dirs: Sequence[str | Path], output_dir: str | Path, rule: str = "ci",
                 alpha: float = 0.05, ci_unit: str = "seed", pairs: Sequence[tuple[str, str]] | None = None,
                 parameters: str | Path | None = None, warn: Callable[[str], None] | None = None,
                 subject_interval: str = "two-level") -> Path:
    """Write the report of one or more run folders and return the path of its ``index.html``.

    Args:
        run_dirs: Run folders, partial or complete; several combine (first wins on conflicts).
        output_dir: Report folder (created).
        rule: "Meaningfully better" rule for chance and controls (``ci``, ``paired``, ``mean``).
        alpha: Level of the paired rule and of the Nemenyi critical difference.
        ci_unit: ``seed`` (published) or ``fold``.
        pairs: Model pairs to compare (default: each tested model vs each control).
        parameters: Optional parameter-count file for Table 7.
        warn: Called with one line per file that was skipped (unreadable record, missing or corrupt
            predictions); the same lines are listed on the page.
        subject_interval: ``two-level`` (default), ``corrected-t`` or ``bootstrap``: the subject-level interval and p of
            the paired effects and verdicts (:mod:`ppgbench_pl.report.subject_interval`).

    Returns:
        The path of ``index.html``.

    Raises:
        ReportError: No usable records, an unknown rule or CI unit, or a bad parameter file.

    """
    if ci_unit not in ("seed", "fold"):
        raise ReportError(f"unknown CI unit '{ci_unit}'; choose seed or fold")
    check_interval(subject_interval)
    opts = ReportOptions(rule, alpha, ci_unit, pairs, Path(parameters) if parameters else None)
    the_rule = Rule(rule, alpha)
    runs = load_runs(run_dirs)
    out = _report_folder(output_dir)
    scores = Scores(runs.records, ci_unit)
    _check_pairs(scores, pairs)
    chance = findings.chance_cells(scores, the_rule)
    controls = findings.control_cells(scores, the_rule)
    _csv(chance, out / "tables" / "chance_cells.csv", opts)
    _csv(controls, out / "tables" / "control_cells.csv", opts)
    head = findings.headline(chance, controls, the_rule)
    opts.paired_findings = effects_page.compute(runs.records, chance, controls, out, alpha, subject_interval,
                                                runs)
    opts.search_noise = search_noise.compute(runs.records, out, alpha, ci_unit)
    opts.written += opts.paired_findings.written + opts.search_noise.written
    opts.overlap_findings = overlap_page.compute(scores, runs.records, the_rule, out)
    opts.citations = references.write(out, runs.records)
    opts.written += opts.overlap_findings.written + opts.citations.written
    index = _write_page(out, runs, scores, the_rule, head, chance, controls, opts)
    if warn is not None:
        for line in runs.skipped:
            warn(line)
    return index
