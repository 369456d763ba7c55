"""The utility subcommands; each module is imported only once its command is chosen (``fit``: protocol_cli)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from ppgbench_pl.errors import ConfigError

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
    ("report", "add_compare_parser"),
    ("init", "add_init_parser"),
    ("data", "add_cache_parser"),
    ("calibrate", "add_calibrate_parser"),
    ("listing", "add_cite_parser"),
    ("report", "add_export_parser"),
    ("report", "add_leaderboard_parser"),
)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``ppgbench: error: ...``), not usage plus message."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("ppgbench").strip()
        raise ConfigError(f"{where + ': ' if where else ''}{message} (see {self.prog} --help)")


def warn(line: str) -> None:
    """A problem the command goes on past, as one line on stderr."""
    print(f"ppgbench: warning: {line}", file=sys.stderr)


def add_subject_interval(parser: argparse.ArgumentParser, interval: str) -> None:
    """``--subject-interval`` of ``report`` and ``compare`` (``interval``: what it qualifies)."""
    parser.add_argument("--subject-interval", choices=("two-level", "corrected-t", "bootstrap"),
                        default="two-level",
                        help=f"Subject-level interval and p{interval}: two-level (default: subject and seed variance "
                             "apart), the Nadeau-Bengio corrected t, or the subject cluster bootstrap (labelled: not "
                             "calibrated; docs/statistics.md).")


def check_alpha(alpha: float) -> None:
    """Refuse a test level outside (0, 1) in one line."""
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha must lie in (0, 1), got {alpha}")


def flag_values(argv: list[str], flag: str) -> list[tuple[int, str, bool]]:
    """(position of the value, value, given as ``flag=value``) of each use of ``flag`` in ``argv``."""
    found = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            found.append((i + 1, argv[i + 1], False))
        elif arg.startswith(f"{flag}="):
            found.append((i, arg.split("=", 1)[1], True))
    return found


def dispatch(argv: list[str]) -> None:
    """Parse ``argv`` (subcommand first) and run the chosen command."""
    parser = _Parser(prog="ppgbench")
    sub = parser.add_subparsers(dest="command", required=True)
    for module, function in _REGISTRARS:
        getattr(importlib.import_module(f"ppgbench_pl.commands.{module}"), function)(sub)
    ns = parser.parse_args(argv)
    ns.func(ns)
