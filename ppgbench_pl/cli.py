"""The ``ppgbench`` command; it imports no command (nor torch or Lightning) until one is chosen, so it starts fast."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import ppgbench_pl
from ppgbench_pl.commands import EXECUTOR_ALIASES, dispatch, flag_values
from ppgbench_pl.errors import user_error
from ppgbench_pl.messages import did_you_mean, fail, flags_in_help, one_line

#: Every command, with its one-line description (the top-level help).
COMMANDS = {
    "fit": "evaluate one encoder (plus controls) under the regimes of a config: the full protocol",
    "benchmark": "the same engine on a matrix of encoders x datasets x regimes (same config language)",
    "list": "datasets, tasks, encoders, controls and regimes that can be run (--json for scripts)",
    "download": "fetch raw datasets (resumable, verified, safe extraction)",
    "preprocess": "raw files -> the processed layout at each sampling rate",
    "report": "tables, findings and figures of one or more run folders",
    "compare": "paired comparison of one model of each of two run folders, cell by cell",
    "init": "a commented config template for evaluating your own model",
    "cache": "list or clear the shared embedding cache (every run folder reads it)",
    "calibrate": "measure this machine's per-regime rates once (about a minute): --dry-run then estimates time",
    "cite": "BibTeX for the benchmark, datasets and models (--datasets ... --models ...)",
    "export": "one model's results as a versioned file others can read (ppgbench report takes it)",
    "leaderboard": "exported results side by side: a sortable, filterable offline HTML page with model cards",
}
PROTOCOL_COMMANDS = ("fit", "benchmark")


def top_help() -> str:
    """``ppgbench --help``: every command on one page."""
    width = max(map(len, COMMANDS))
    lines = ["usage: ppgbench <command> [options]", "",
             "One controlled protocol for evaluating PPG foundation models.", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    lines += ["", "ppgbench <command> --help shows a command's options, e.g. ppgbench fit --help.",
              "Quick start: ppgbench fit --config configs/quickstart.yaml"]
    return "\n".join(lines)


# -- the protocol commands ------------------------------------------------------------------------------
def build_cli(args: Any = None, run: bool = True) -> Any:
    """The LightningCLI of ``fit``/``benchmark`` (see :mod:`ppgbench_pl.benchmark.protocol_cli`)."""
    from ppgbench_pl.benchmark.protocol_cli import build_cli as build

    return build(args, run)


def help_cache_path(command: str) -> Path:
    """The cached ``--help`` of ``fit``/``benchmark``, keyed on our source, the parsing libraries, the width."""
    from importlib import metadata

    digest = hashlib.sha256(f"{command}|{ppgbench_pl.__version__}|{os.environ.get('COLUMNS', '')}".encode())
    for package in ("lightning", "jsonargparse", "torch"):
        try:
            digest.update(f"{package}={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(package.encode())
    for path in sorted(Path(ppgbench_pl.__file__).parent.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ppgbench"
    return root / f"help-{command}-{digest.hexdigest()[:24]}.txt"


def cached_help(command: str) -> str:
    """The help of ``fit``/``benchmark``: built once by LightningCLI (seconds), then read from the cache."""
    path = help_cache_path(command)
    with contextlib.suppress(OSError):
        return path.read_text()
    buffer = io.StringIO()
    warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        build_cli([command, "--help"])
    text = buffer.getvalue()
    with contextlib.suppress(OSError):  # an unwritable cache only costs the next call its speed
        from ppgbench_pl.atomic_io import write_text_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return text


def user_modules_importable() -> None:
    """A user's ``class_path`` (model, callback) in the working folder imports, as under ``python -m``."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def check_top_level_flags(command: str, argv: list[str]) -> None:
    """Refuse a mistyped top-level flag (``--outptu_dir``) in one line, before Lightning is imported (cached help)."""
    try:
        known = flags_in_help(help_cache_path(command).read_text())
    except OSError:
        return
    for arg in argv[1:]:
        flag = arg.split("=", 1)[0]
        nested = any(k.startswith(f"{flag}.") for k in known)  # --matrix for --matrix.datasets and friends
        if flag.startswith("--") and "." not in flag and len(known) > 10 and flag not in known and not nested:
            fail(f"unrecognized arguments: {flag}{did_you_mean(flag, known)} (see ppgbench {command} --help)")


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``ppgbench`` script; user errors become one line and exit status 2."""
    argv = list(sys.argv[1:] if args is None else args)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(top_help())
        raise SystemExit(0 if argv else 2)
    if argv[0] in ("--version", "-V"):
        print(f"ppgbench {ppgbench_pl.__version__}")
        raise SystemExit(0)
    command = argv[0]
    if command not in COMMANDS:
        fail(f"unknown command '{command}'{did_you_mean(command, COMMANDS)} (commands: {', '.join(COMMANDS)})")
    if command in PROTOCOL_COMMANDS and len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(cached_help(command), end="")
        raise SystemExit(0)
    try:
        if command in PROTOCOL_COMMANDS:
            from ppgbench_pl.benchmark.console import quiet_lightning
            from ppgbench_pl.commands.config_bases import expand_bases

            argv = expand_bases(argv)  # refuses a missing --config file
            check_top_level_flags(command, argv)
            user_modules_importable()
            quiet_lightning()
            warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
            for index, name, joined in flag_values(argv, "--executor"):  # short names of the four executors
                if name in EXECUTOR_ALIASES:
                    argv[index] = f"--executor={EXECUTOR_ALIASES[name]}" if joined else EXECUTOR_ALIASES[name]
            cli = build_cli(argv)
            if getattr(cli, "exit_code", 0):
                raise SystemExit(cli.exit_code)
            return
        if command == "calibrate":  # it reads fit configs: their class paths resolve as fit resolves them
            user_modules_importable()
        dispatch(argv)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        print("ppgbench: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # noqa: BLE001 - a user error anywhere in the chain becomes one line
        cause = user_error(exc)
        if cause is None:
            raise
        fail(one_line(str(cause)))
    except BaseException as exc:
        code = getattr(exc, "exit_code", None)  # a signal (run_report.Interrupted) outside the job loop
        if isinstance(code, int):
            print(f"ppgbench: interrupted ({exc})", file=sys.stderr)
            raise SystemExit(code) from None
        raise
