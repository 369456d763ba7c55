"""``ppgbench benchmark --config configs/benchmark.yaml``: the whole suite, resumable, on any executor.

Options come from YAML and the command line through jsonargparse (``class_path`` entries for encoders,
regimes and the executor, validated against their signatures; configs stack; ``--print_config``):

* what to run: ``--encoders``, ``--regimes``, ``--datasets``, ``--tasks``, ``--seeds``, ``--folds``,
  ``--only_encoders NAME ...`` / ``--only_regimes NAME ...`` (pick by name from the config's lists);
* devices: ``--trainer.accelerator``, ``--trainer.devices``, ``--trainer.strategy``,
  ``--trainer.precision`` (handed to every inner trainer);
* where: ``--executor local|process|submitit|dask`` (or a class_path) with ``--executor.workers`` etc.;
* ``--wandb group|per-job|off``, ``--output_dir``, ``--dry-run`` (print the plan and its size, read no data).

Exit status: 0 when every job of the plan is done, 1 when a job failed or was lost (rerun to retry
them), 2 for a config error, 130 when interrupted (rerun to continue).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Literal

from jsonargparse import ActionConfigFile, ArgumentParser

from ppgbench_pl.benchmark.executors import (
    DaskExecutor,
    Executor,
    LocalExecutor,
    ProcessExecutor,
    SubmititExecutor,
)
from ppgbench_pl.benchmark.suite import add_suite_arguments, encoder_info, instantiate
from ppgbench_pl.errors import ConfigError, PPGBenchError
from ppgbench_pl.regimes.base import Regime

EXECUTORS: dict[str, type[Executor]] = {
    "local": LocalExecutor, "process": ProcessExecutor, "submitit": SubmititExecutor, "dask": DaskExecutor,
}
#: Keys of the parsed namespace that are actions, not settings.
ACTIONS = ("config", "dry_run", "print_config", "only_encoders", "only_regimes")


def benchmark_parser() -> ArgumentParser:
    """The ``benchmark`` command's parser (suite options plus how and where to run)."""
    parser = ArgumentParser(prog="ppgbench benchmark", exit_on_error=False,
                            description="Run the benchmark suite into a resumable run folder.")
    parser.add_argument("--config", action=ActionConfigFile, help="YAML config (may be given several times).")
    add_suite_arguments(parser)
    parser.add_argument("--output_dir", type=str, default="results/benchmark", help="Run folder (resumable).")
    parser.add_argument("--executor", type=Executor, default={"class_path": f"{LocalExecutor.__module__}.LocalExecutor"},
                        help="local | process | submitit | dask, or a class_path with init_args.")
    parser.add_argument("--wandb", type=Literal["group", "per-job", "off"] | bool, default="group",
                        help="W&B runs per (model, task, regime) cell, per job as well, or none (YAML's "
                             "unquoted off/on read as false/true and mean off/group).")
    parser.add_argument("--wandb_project", type=str, default="ppgbench", help="W&B project.")
    parser.add_argument("--ci_unit", type=Literal["seed", "fold"], default="seed", help="CI over seed means or folds.")
    parser.add_argument("--progress", type=bool, default=True, help="Progress bar on stderr.")
    parser.add_argument("--only_encoders", type=list[str] | None, default=None, help="Run only these encoders.")
    parser.add_argument("--only_regimes", type=list[str] | None, default=None, help="Run only these regimes.")
    parser.add_argument("--dry_run", "--dry-run", action="store_true", help="Print the plan and its size, then exit.")
    return parser


def expand_aliases(argv: list[str]) -> list[str]:
    """``--executor process`` -> the class path (short names for the four executors)."""
    out = list(argv)
    for i, arg in enumerate(out):
        name = arg.split("=", 1)[1] if arg.startswith("--executor=") else (
            out[i + 1] if arg == "--executor" and i + 1 < len(out) else None)
        if name in EXECUTORS:
            path = f"{EXECUTORS[name].__module__}.{EXECUTORS[name].__name__}"
            if arg == "--executor":
                out[i + 1] = path
            else:
                out[i] = f"--executor={path}"
    return out


def one_line(exc: BaseException) -> str:
    """A nested jsonargparse message on one line."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def resolve(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse ``argv`` into (resolved config, actions); name filters are applied to the config's lists.

    Raises:
        ConfigError: The arguments or the config are invalid.
    """
    parser = benchmark_parser()
    try:
        namespace = parser.parse_args(expand_aliases(argv))
        resolved = json.loads(parser.dump(namespace, format="json", skip_validation=True))
    except (argparse.ArgumentError, ValueError, TypeError) as exc:
        raise ConfigError(one_line(exc)) from None
    actions = {k: resolved.pop(k, None) for k in ACTIONS}
    actions["dry_run"] = bool(namespace.get("dry_run"))
    if isinstance(resolved.get("wandb"), bool):
        resolved["wandb"] = "group" if resolved["wandb"] else "off"
    if actions["only_encoders"]:
        resolved["encoders"] = _pick("encoder", resolved["encoders"], actions["only_encoders"],
                                     [encoder_info(e).name for e in resolved["encoders"]])
    if actions["only_regimes"]:
        resolved["regimes"] = _pick("regime", resolved["regimes"], actions["only_regimes"],
                                    [instantiate(Regime, e).name for e in resolved["regimes"]])
    return resolved, actions


def _pick(kind: str, entries: list[dict[str, Any]], wanted: list[str], names: list[str]) -> list[dict[str, Any]]:
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        raise ConfigError(f"unknown {kind} {', '.join(unknown)}; the config has {', '.join(names)}")
    return [e for e, n in zip(entries, names, strict=True) if n in wanted]


def run(argv: list[str]) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun, RunOptions, dry_run
    from ppgbench_pl.benchmark.fit import print_report, quiet_lightning

    config, actions = resolve(argv)
    output_dir = Path(config["output_dir"])
    if actions["dry_run"]:
        print(dry_run(config, output_dir))
        return 0
    quiet_lightning()
    options = RunOptions(output_dir, instantiate(Executor, config["executor"]), config["wandb"],
                         config["wandb_project"], config["ci_unit"], config["progress"])
    try:
        report = BenchmarkRun(config, options).run()
    except KeyboardInterrupt:
        return 130
    print_report(report, output_dir)
    print(f"embedding cache: {report.cache.get('misses', 0)} computed, {report.cache.get('hits', 0)} reused")
    return 1 if report.failed else 0


def main(argv: list[str] | None = None) -> None:
    """Entry point (``ppgbench benchmark ...`` dispatches here with the arguments after ``benchmark``)."""
    try:
        code = run(list(sys.argv[1:] if argv is None else argv))
    except PPGBenchError as exc:  # a config, data or checkpoint problem: one line, no traceback
        print(f"ppgbench: error: {one_line(exc)}", file=sys.stderr)
        code = 2
    raise SystemExit(code)


def add_benchmark_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``benchmark`` with the argparse dispatcher; its arguments go to jsonargparse untouched."""
    parser = sub.add_parser("benchmark", prefix_chars="+", add_help=False,
                            help="Run the benchmark suite (ppgbench benchmark --help for its options).")
    parser.add_argument("argv", nargs="*")
    parser.set_defaults(func=lambda ns: main(ns.argv))


if __name__ == "__main__":
    main()
