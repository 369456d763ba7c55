"""``ppgbench compare RUN_A RUN_B [--model A --model B]``: one model of each run, paired per cell (issue 19)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ppgbench_pl.commands import add_subject_interval, check_alpha, warn
from ppgbench_pl.errors import ConfigError


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
    from ppgbench_pl.report.compare_runs import compare_runs, meta_line, refused_line, write_comparison

    check_alpha(ns.alpha)
    names = ns.model or []
    if len(names) > 2:
        raise ConfigError(f"--model is given at most twice (one per run), got {len(names)}")
    models = (names[0], names[-1]) if names else (None, None)
    result = compare_runs(ns.run_a, ns.run_b, models, ns.alpha, ns.subject_interval)
    from ppgbench_pl.report.compare_runs import paper_table

    print(paper_table(result.table).to_string(index=False))
    if line := refused_line(result):
        warn(line)
    if ns.output is not None:
        print(f"compare: {write_comparison(result, ns.output)}")
    if meta := meta_line(result.meta):
        print(meta)
    print(result.summary)
