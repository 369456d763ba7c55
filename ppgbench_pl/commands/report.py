"""``ppgbench report RUN [RUN ...] --output DIR``: tables, findings, figures and a web page."""

from __future__ import annotations

import argparse
from pathlib import Path

from ppgbench_pl.commands import add_subject_interval, check_alpha, warn


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
