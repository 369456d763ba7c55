"""The commands that read run folders and exports: ``report``, ``compare``, ``export`` and ``leaderboard``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ppgbench_pl.commands import add_subject_interval, check_alpha, warn
from ppgbench_pl.errors import ConfigError


def _pair(text: str) -> tuple[str, str]:
    """``A:B`` -> (A, B) for ``--compare``."""
    a, sep, b = text.partition(":")
    if not sep or not a or not b:
        raise argparse.ArgumentTypeError(f"expected MODEL_A:MODEL_B, got '{text}'")
    return a, b


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``report``."""
    parser = sub.add_parser(
        "report", description="Combine one or more run folders (partial or complete) into a report folder.")
    parser.add_argument("runs", nargs="+", type=Path,
                        help="Run folders (jobs/<id>/results.json inside) or files from ppgbench export.")
    parser.add_argument("--output", "-o", type=Path, default=Path("report"),
                        help="Report folder (default: report): built beside it and swapped in whole once "
                             "complete; a folder of files that are not a report is refused.")
    parser.add_argument("--baseline-rule", choices=("ci", "paired", "mean"), default="ci",
                        help="When a model meaningfully beats the constant baseline or a control: 'ci' "
                             "better mean and non-overlapping 95%% CIs (default), 'paired' better mean and "
                             "paired t-test p < alpha, 'mean' better mean only.")
    parser.add_argument("--alpha", type=float, default=0.05, help="Level of the paired rule and the Nemenyi CD.")
    parser.add_argument("--ci-unit", choices=("seed", "fold"), default="seed",
                        help="CI over seed means (published) or over all seed x fold values.")
    parser.add_argument("--compare", type=_pair, action="append", metavar="A:B",
                        help="Model pair for paired comparisons (repeatable; default: each model vs each "
                             "control).")
    add_subject_interval(parser, " of the paired effects and their verdicts")
    parser.add_argument("--parameters", type=Path, default=None,
                        help="Parameter counts for Table 7: CSV (model,total[,trainable]) or JSON.")
    parser.set_defaults(func=run_report)


def run_report(ns: argparse.Namespace) -> None:
    """Build the report and print where it is and the headline findings."""
    from ppgbench_pl.report import build_report

    check_alpha(ns.alpha)
    index = build_report(ns.runs, ns.output, rule=ns.baseline_rule, alpha=ns.alpha, ci_unit=ns.ci_unit,
                         pairs=ns.compare, parameters=ns.parameters, warn=warn,
                         subject_interval=ns.subject_interval)
    findings = index.parent / "findings.md"
    for line in findings.read_text(encoding="utf-8").splitlines():
        if line.startswith("- "):
            print(line[2:])
    print(f"report: {index}")


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``compare``."""
    parser = sub.add_parser(
        "compare", description="Per task x regime: paired difference on matched seeds x folds, seed and subject-level "
                    "(corrected t) intervals, raw and Benjamini-Hochberg p, MDD, win/tie/loss. Cells whose "
                    "seeds or folds differ are refused. The printed table (and compare.tex) gives the metric, unit, "
                    "direction, both means and the verdict in words, rounded to the interval's precision.")
    parser.add_argument("run_a", type=Path, help="First run folder.")
    parser.add_argument("run_b", type=Path, help="Second run folder.")
    parser.add_argument("--model", action="append", default=None, metavar="NAME",
                        help="Model of RUN_A, then of RUN_B (once: the same name in both; default: each run's "
                             "only PPG-specific model).")
    parser.add_argument("--alpha", type=float, default=0.05, help="Level of the tests (default 0.05).")
    add_subject_interval(parser, "")
    parser.add_argument("--output", "-o", type=Path, default=None,
                        help="Folder for compare.csv, compare.md and compare.tex (default: print only).")
    parser.set_defaults(func=run_compare)


def run_compare(ns: argparse.Namespace) -> None:
    """Compare, print the summary line and the table, and write them when --output is given."""
    from ppgbench_pl.report.compare_runs import compare_runs, meta_line, paper_table, refused_line, write_comparison

    check_alpha(ns.alpha)
    names = ns.model or []
    if len(names) > 2:
        raise ConfigError(f"--model is given at most twice (one per run), got {len(names)}")
    models = (names[0], names[-1]) if names else (None, None)
    result = compare_runs(ns.run_a, ns.run_b, models, ns.alpha, ns.subject_interval)
    print(paper_table(result.table).to_string(index=False))
    if line := refused_line(result):
        warn(line)
    if ns.output is not None:
        print(f"compare: {write_comparison(result, ns.output)}")
    if meta := meta_line(result.meta):
        print(meta)
    print(result.summary)


def add_export_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``export``."""
    parser = sub.add_parser(
        "export", description="One versioned file per model: every cell with its seed and fold values, the records, "
                    "the prediction arrays of every job, the protocol settings, versions, digests and the "
                    "model card.")
    parser.add_argument("run", type=Path, help="the run folder (run.json and jobs/ inside)")
    parser.add_argument("--output", "-o", type=Path, default=None,
                        help="file to write (default: <model>.ppgbench.json)")
    parser.add_argument("--model", default=None,
                        help="the model under test to export, when the run holds several")
    parser.set_defaults(func=_export_command)


def _export_command(ns: argparse.Namespace) -> None:
    from ppgbench_pl.results.export import export_run

    path = export_run(ns.run, ns.output, ns.model, warn=warn)
    print(f"exported: {path}")


def add_leaderboard_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``leaderboard``."""
    parser = sub.add_parser(
        "leaderboard",
        description="Models x tasks per regime with CI, units, near-chance and pretraining-overlap marks; "
                    "sortable columns, filters by regime, tier and dataset, and each model's card. One "
                    "index.html with its style and script inline: it opens from disk with no network.")
    parser.add_argument("inputs", nargs="+", type=Path, metavar="FILE",
                        help="files from ppgbench export (or run folders), all made under the same protocol")
    parser.add_argument("--output", "-o", type=Path, default=Path("site"),
                        help="folder to write index.html into (default: site)")
    parser.set_defaults(func=_leaderboard_command)


def _leaderboard_command(ns: argparse.Namespace) -> None:
    from ppgbench_pl.leaderboard import build_leaderboard

    print(f"leaderboard: {build_leaderboard(ns.inputs, ns.output)}")
