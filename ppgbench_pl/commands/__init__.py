"""Utility subcommands that are not a LightningCLI ``fit``: list, download, preprocess, report, init, benchmark."""

from __future__ import annotations

import argparse

from ppgbench_pl.commands.benchmark import add_benchmark_parser
from ppgbench_pl.commands.data import add_data_parsers
from ppgbench_pl.commands.init import add_init_parser
from ppgbench_pl.commands.listing import add_list_parser
from ppgbench_pl.commands.report import add_report_parser



def dispatch(argv: list[str]) -> None:
    """Parse ``argv`` (subcommand first) and run the chosen command."""
    parser = argparse.ArgumentParser(prog="ppgbench")
    sub = parser.add_subparsers(dest="command", required=True)
    add_list_parser(sub)
    add_data_parsers(sub)
    add_report_parser(sub)
    add_init_parser(sub)
    add_benchmark_parser(sub)
    ns = parser.parse_args(argv)
    ns.func(ns)
