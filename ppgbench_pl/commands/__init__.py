"""Utility subcommands (list, download, preprocess, report, init, cite, export).

``fit``/``benchmark`` live in :mod:`.protocol`.

Each command module is imported only when it is registered, inside :func:`dispatch`, so importing one
command (e.g. the report, which must not pull in torch or Lightning) costs nothing else.
"""

from __future__ import annotations

import argparse
import importlib
from typing import NoReturn

#: Short names of the four executors (``--executor process``; the API's ``executor="process"``).
EXECUTOR_ALIASES = {
    "local": "ppgbench_pl.benchmark.executors.LocalExecutor",
    "process": "ppgbench_pl.benchmark.executors.ProcessExecutor",
    "submitit": "ppgbench_pl.benchmark.executors.SubmititExecutor",
    "dask": "ppgbench_pl.benchmark.executors.DaskExecutor",
}
#: (module, function that registers the module's subparser(s)).
_REGISTRARS = (
    ("listing", "add_list_parser"),
    ("data", "add_data_parsers"),
    ("report", "add_report_parser"),
    ("compare", "add_compare_parser"),
    ("init", "add_init_parser"),
    ("cache", "add_cache_parser"),
    ("calibrate", "add_calibrate_parser"),
    ("cite", "add_cite_parser"),
    ("export", "add_export_parser"),
    ("leaderboard", "add_leaderboard_parser"),
)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``ppgbench: error: ...``), not usage plus message."""

    def error(self, message: str) -> NoReturn:
        from ppgbench_pl.errors import ConfigError

        where = self.prog.removeprefix("ppgbench").strip()
        raise ConfigError(f"{where + ': ' if where else ''}{message} (see {self.prog} --help)")


def dispatch(argv: list[str]) -> None:
    """Parse ``argv`` (subcommand first) and run the chosen command."""
    parser = _Parser(prog="ppgbench")
    sub = parser.add_subparsers(dest="command", required=True)
    for module, function in _REGISTRARS:
        getattr(importlib.import_module(f"ppgbench_pl.commands.{module}"), function)(sub)
    ns = parser.parse_args(argv)
    ns.func(ns)
