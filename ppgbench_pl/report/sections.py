"""The body of the report page: the main tables, the comparisons between models, the paper's analyses.

Figures as PNG and SVG, drawn on ``matplotlib.figure.Figure`` (never pyplot: no GUI backend or global state).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report import analyses, compare, findings, tables
from ppgbench_pl.report.compare import Ranking, Rule, Scores
from ppgbench_pl.report.effects import MIN_SEEDS
from ppgbench_pl.report.folder import Page, table
from ppgbench_pl.report.load import RunSet
from ppgbench_pl.report.tables import metric_label, safe_stem

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class ReportOptions:
    """Choices that change what the report says (:func:`~ppgbench_pl.report.build.build_report`), and its parts."""

    alpha: float = 0.05
    ci_unit: str = "seed"
    pairs: Sequence[tuple[str, str]] | None = None
    parameters: Path | None = None
    written: list[Path] = field(default_factory=list)
    flags: dict[tuple[str, str], str] = field(default_factory=dict)  # (task, model) -> pretraining overlap
    jobs: pd.DataFrame = field(default_factory=pd.DataFrame)  # Table 4's rescored jobs


def write_csv(frame: pd.DataFrame, path: Path, opts: ReportOptions) -> pd.DataFrame:
    """Write one table of the report, list it among the files and return it."""
    frame.to_csv(path, index=False)
    opts.written.append(path)
    return frame


def main_tables(page: Page, scores: Scores, rule: Rule, cells: pd.DataFrame, out: Path,
                opts: ReportOptions) -> None:
    """The main tables (one per regime), written to ``tables/`` and drawn on the page."""
    opts.written += tables.write_main_tables(cells, scores, rule, out / "tables")
    page.heading("Main tables", anchor="tables")
    for regime in scores.regimes:
        wide = tables.wide_table(cells, regime, scores.models, scores.tasks(regime), lambda t: f"<strong>{t}</strong>")
        page.heading(regime, level=3)
        page.raw(table(wide, tables.caption(regime, rule, opts.ci_unit, cells), raw=scores.models,
                       row_class=lambda row: "near_chance" if str(row["task"]).endswith("†") else ""))


def paper_analyses(page: Page, runs: RunSet, out: Path, opts: ReportOptions) -> None:
    """Tables 3, 4, 6 and 7 of the paper (Table 4 reads the predictions and notes missing files)."""
    page.heading("Subject-level aggregation selected (Table 3)", anchor="aggregation")
    freq = write_csv(analyses.aggregation_frequency(analyses.aggregation_choices(runs.records)),
                     out / "tables" / "aggregation_frequency.csv", opts)
    page.raw(table(freq, "Selections (job x repeat) per strategy on subject-level tasks with a choice."))

    page.heading("Subject-level vs window-level scoring of the same predictions (Table 4)", anchor="rescoring")
    jobs = write_csv(opts.jobs, out / "tables" / "rescoring_jobs.csv", opts)
    resc = write_csv(analyses.rescoring_table(jobs), out / "tables" / "rescoring.csv", opts)
    page.raw(table(*findings.marked(resc, opts.flags, "Subject level uses the "
                                         "aggregation each job selected; n_mismatched counts rescored values "
                                         "that differ from the recorded metric (should be 0).")))

    page.heading("Edge pressure of the searches (Table 6)", anchor="edges")
    edges = write_csv(analyses.edge_choices(runs.records), out / "tables" / "edge_choices.csv", opts)
    pressure = write_csv(analyses.edge_pressure(edges), out / "tables" / "edge_pressure.csv", opts)
    page.raw(table(pressure, "Fraction of selections at the lowest / highest value seen in the job's own "
                             "search (grid points or Optuna trials; selected epoch vs epochs recorded)."))

    page.heading("Parameters (Table 7)", anchor="parameters")
    counts = dict(runs.parameters)
    if opts.parameters is not None:
        counts.update(analyses.read_parameter_file(opts.parameters))
    params = write_csv(analyses.parameter_table(counts, runs.models), out / "tables" / "parameters.csv", opts)
    if params.empty:
        page.paragraph("No parameter counts in these runs. Pass --parameters FILE (CSV: "
                       "model,total[,trainable], or JSON) to add them.", "note")
    else:
        page.raw(table(params))


def comparisons(page: Page, scores: Scores, out: Path, opts: ReportOptions) -> None:
    """Figure 1, the critical-difference ranking and the paired comparisons."""
    page.heading("Regime comparison (Figure 1)", anchor="regimes")
    if scores.tasks():
        figure(page, opts, regime_comparison(scores), "regime_comparison",
               "Each model's mean ± 95% CI per task under every regime present.")

    page.heading("Ranking across tasks (critical difference)", anchor="ranking")
    most = scores.summary.groupby("regime")["n_seeds"].max()
    few = [str(r) for r, n in most.items() if n < MIN_SEEDS]  # no CD diagram without seeds to rank on
    rankings = [r for regime in scores.regimes
                if regime not in few and (r := compare.rank_models(scores, regime, opts.alpha))]
    if few:
        page.paragraph(f"No Friedman test or critical-difference diagram for {', '.join(few)}: fewer than "
                       f"{MIN_SEEDS} seeds, so the per-task means that would be ranked carry no usable "
                       "uncertainty; see the paired effects instead.", "note")
    write_csv(compare.ranking_table(rankings), out / "tables" / "ranking.csv", opts)
    for r in rankings:
        dropped = f" Left out for missing tasks: {', '.join(r.dropped_models)}." if r.dropped_models else ""
        figure(page, opts, cd_diagram(r), f"cd_{safe_stem(r.regime)}",
               f"{r.regime}: average ranks (1 = best) over {r.n_tasks} tasks; models joined by a bar are not "
               f"different by the Nemenyi test (alpha {opts.alpha:g}).{dropped}")
    if not rankings:
        page.paragraph("A ranking needs at least two models on at least two tasks in one regime.", "note")

    page.heading("Paired comparisons", anchor="paired")
    paired = write_csv(compare.paired_comparisons(scores, opts.pairs), out / "tables" / "paired.csv", opts)
    if note := paired_note(paired, opts.ci_unit):
        page.paragraph(note, "note")
    if not paired.empty:
        sig = paired[paired["t_pvalue"] < opts.alpha]
        tally = paired.groupby(["regime", "model_a", "model_b"], sort=False).size().rename("cells").to_frame()
        for side in ("a", "b"):
            wins = sig[sig["better"] == sig[f"model_{side}"]].groupby(["regime", "model_a", "model_b"]).size()
            tally[f"{side}_better_p<{opts.alpha:g}"] = wins.reindex(tally.index).fillna(0).astype(int)
        page.raw(table(tally.reset_index(), "Cells where one side is better with a paired t-test p below alpha."))
    page.details(f"All {len(paired)} paired comparisons", table(*findings.marked(paired, opts.flags)))


def paired_note(paired: pd.DataFrame, unit: str) -> str:
    """What the paired comparisons are; the Wilcoxon floor (2 / 2^n) only where a test was made and it bites."""
    if paired.empty:
        return ""
    tested = paired.loc[pd.to_numeric(paired["t_pvalue"], errors="coerce").notna(), "n_pairs"]
    if tested.empty:
        return (f"Differences model_a - model_b over the same {unit}s and folds. One {unit} per comparison: "
                "no confidence interval, t-test or Wilcoxon test can be made, so no side is called better.")
    text = (f"Differences model_a - model_b over the same {unit}s and folds: mean with Student-t 95% CI, "
            "paired t-test and Wilcoxon signed-rank (two-sided).")
    n = int(tested.max())
    if n <= 6:
        text += f" With {n} {unit}s Wilcoxon cannot go below p = {2.0 ** (1 - n):.4g}."
    return text


def figure(page: Page, opts: ReportOptions, fig: Figure, stem: str, caption: str) -> None:
    """Write ``figures/<stem>.png`` and ``.svg`` reproducibly (no timestamps, fixed SVG ids), list and show them."""
    from matplotlib import rc_context

    paths = [page.root / "figures" / f"{stem}.{fmt}" for fmt in ("png", "svg")]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    with rc_context({"svg.hashsalt": "ppgbench", "svg.fonttype": "path"}):
        for path, meta in zip(paths, ({"Software": None}, {"Date": None}), strict=True):
            fig.savefig(path, format=path.suffix[1:], dpi=150, bbox_inches="tight", metadata=meta)
    opts.written += paths
    png, svg = (path.relative_to(page.root).as_posix() for path in paths)
    page.raw(f'<figure><img src="{html.escape(png)}" alt="{html.escape(caption)}">'
             f'<figcaption>{html.escape(caption)} (<a href="{svg}">SVG</a>)</figcaption></figure>')


def regime_comparison(scores: Scores) -> Figure:
    """Figure 1: one panel per task; each model's mean ± CI under every regime present."""
    from matplotlib.figure import Figure

    regimes, tasks, models = scores.regimes, scores.tasks(), scores.models
    ncols = min(4, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    fig = Figure(figsize=(3.3 * ncols, 2.7 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    colours = {m: f"C{i % 10}" for i, m in enumerate(m for m in models if not is_baseline(m))}  # baselines grey
    colours.update({m: ("0.35", "0.55", "0.7", "0.2")[i % 4] for i, m in enumerate(filter(is_baseline, models))})
    offsets = np.linspace(-0.25, 0.25, len(models)) if len(models) > 1 else np.zeros(1)
    for ax, task in zip(axes.ravel(), tasks, strict=False):
        for offset, model in zip(offsets, models, strict=True):
            points = [(x + offset, s.mean, s.half_width) for x, regime in enumerate(regimes)
                      if (s := scores.get(task, regime, model)) is not None]
            if points:
                xs, ys, es = (list(column) for column in zip(*points, strict=True))
                style = "--" if is_baseline(model) else "-"
                ax.errorbar(xs, ys, yerr=es, fmt="o", ls=style if len(xs) > 1 else "none", ms=4, capsize=2,
                            color=colours[model], label=model, lw=1)
        ax.set_title(task, fontsize=9)
        ax.set_xticks(range(len(regimes)), regimes, fontsize=8)
        ax.set_xlim(-0.6, len(regimes) - 0.4)
        ax.set_ylabel(metric_label(scores.metric.get(task, ""), task), fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.ravel()[len(tasks):]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), fontsize=8, frameon=False)
    return fig


def cliques(ranks: list[float], cd: float) -> list[tuple[int, int]]:
    """Maximal runs (i, j) of rank-sorted models whose average ranks differ by at most the CD."""
    out: list[tuple[int, int]] = []
    for i in range(len(ranks)):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] - ranks[i] <= cd:
            j += 1
        if j > i and not any(a <= i and j <= b for a, b in out):
            out.append((i, j))
    return out


def cd_diagram(ranking: Ranking) -> Figure:
    """Draw a CD diagram: average ranks (1 = best), the CD bar, models that do not differ joined."""
    from matplotlib.figure import Figure

    names = list(ranking.average_ranks.index)
    ranks = [float(r) for r in ranking.average_ranks.to_numpy()]
    k = len(names)
    half = math.ceil(k / 2)
    fig = Figure(figsize=(7.0, 1.4 + 0.3 * half), layout="constrained")
    ax = fig.subplots()
    ax.set_xlim(0.9, k + 0.1)
    ax.set_ylim(-(0.6 + 0.3 * half), 0.75)
    ax.axis("off")
    ax.hlines(0.0, 1, k, color="k", lw=1)
    for t in range(1, k + 1):
        ax.vlines(t, 0.0, 0.08, color="k", lw=1)
        ax.text(t, 0.12, str(t), ha="center", va="bottom", fontsize=8)
    cd = ranking.critical_difference
    if cd <= k - 1:
        ax.hlines(0.55, 1, 1 + cd, color="k", lw=1.5)
        ax.vlines([1, 1 + cd], 0.5, 0.6, color="k", lw=1.5)
        ax.text(1 + cd / 2, 0.62, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    for i, (name, rank) in enumerate(zip(names, ranks, strict=True)):
        left = i < half
        y = -(0.45 + 0.3 * (i if left else k - 1 - i))
        x_end = 0.95 if left else k + 0.05
        ax.plot([rank, rank, x_end], [0.0, y, y], color="k", lw=0.8)
        ax.text(x_end - 0.03 if left else x_end + 0.03, y, f"{name} ({rank:.2f})",
                ha="right" if left else "left", va="center", fontsize=8)
    for n, (i, j) in enumerate(cliques(ranks, cd)):
        y = -0.12 - 0.08 * n
        ax.hlines(y, ranks[i] - 0.03, ranks[j] + 0.03, color="k", lw=3)
    p = ranking.friedman_pvalue
    ptext = "n/a (< 3 models)" if math.isnan(p) else f"{p:.3g}"
    ax.set_title(f"{ranking.regime}: average rank over {ranking.n_tasks} tasks; Friedman p = {ptext}", fontsize=9)
    return fig
