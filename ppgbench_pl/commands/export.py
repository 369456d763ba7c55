"""``ppgbench export RUN [--model NAME] --output MODEL.ppgbench.json``: one model's results in one file."""

from __future__ import annotations

import argparse
from pathlib import Path


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
    parser.set_defaults(func=_command)


def _command(ns: argparse.Namespace) -> None:
    from ppgbench_pl.commands import warn
    from ppgbench_pl.results.export import export_run

    path = export_run(ns.run, ns.output, ns.model, warn=warn)
    print(f"exported: {path}")
