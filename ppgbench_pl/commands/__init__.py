"""Utility subcommands that are not a LightningCLI ``fit``: list, and (later) download, preprocess, report."""

from __future__ import annotations

import argparse

from ppgbench_pl.commands.listing import add_list_parser


def dispatch(argv: list[str]) -> None:
    """Parse ``argv`` (subcommand first) and run the chosen command."""
    parser = argparse.ArgumentParser(prog="ppgbench")
    sub = parser.add_subparsers(dest="command", required=True)
    add_list_parser(sub)
    ns = parser.parse_args(argv)
    ns.func(ns)
