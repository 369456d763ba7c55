"""``ppgbench leaderboard FILE... --output site/``: exported results side by side on one offline page."""

from __future__ import annotations

import argparse
from pathlib import Path


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
    parser.set_defaults(func=_command)


def _command(ns: argparse.Namespace) -> None:
    from ppgbench_pl.leaderboard import build_leaderboard

    print(f"leaderboard: {build_leaderboard(ns.inputs, ns.output)}")
