"""How :func:`ppgbench_pl.api.evaluate` runs its config: through the engine of ``ppgbench fit``, or its dry run."""

from __future__ import annotations

import sys
import warnings
from typing import Any

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.exported_results import Results

LOCAL_EXECUTOR = "ppgbench_pl.benchmark.executors.LocalExecutor"


def run_config(config: dict[str, Any]) -> Results | None:
    """Run a config as ``ppgbench fit`` does (same parser, same engine); with ``dry_run``, print its plan instead."""
    from ppgbench_pl.benchmark.console import quiet_lightning
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun
    from ppgbench_pl.benchmark.protocol_cli import parse_setup
    from ppgbench_pl.locks import waiting_at_most

    quiet_lightning()
    warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
    setup = parse_setup(config)
    if setup.resolved is None and setup.settings.executor.get("class_path") != LOCAL_EXECUTOR:
        raise ConfigError("objects built in this process (an nn.Module, a PPGEncoder or Regime instance) run only "
                          "with the local executor; give them by name or class path instead")
    run = BenchmarkRun(setup)
    if setup.settings.dry_run:
        print(run.dry_run())
        return None
    with waiting_at_most(setup.actions["lock_timeout"]):
        report = run.run()
    if report.interrupted is not None:
        raise KeyboardInterrupt(f"interrupted after {report.completed + report.skipped} of {report.planned} "
                                "jobs; call evaluate again to resume")
    if report.skipped:  # a resumed folder: say what was reused (the CLI's last line says it too)
        print(f"resumed {setup.settings.output_dir}: {report.skipped} of {report.planned} jobs reused (already "
              f"done), {report.completed} run", file=sys.stderr)
    if report.failed:
        warnings.warn(f"{len(report.failed)} of {report.planned} jobs failed (Results.failed lists them; "
                      "they run again next time)", stacklevel=3)
    return Results(setup.settings.output_dir, run=report)
