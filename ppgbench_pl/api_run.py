"""How :func:`ppgbench_pl.api.evaluate` runs its config: through the engine of ``ppgbench fit``, or its dry run.

Kept out of :mod:`ppgbench_pl.api` (which builds the config) so each stays small; nothing here is imported
until :func:`~ppgbench_pl.api.evaluate` runs.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.exported_results import Results

LOCAL_EXECUTOR = "ppgbench_pl.benchmark.executors.LocalExecutor"


def run_config(config: dict[str, Any]) -> Results | None:
    """Run a config through the engine of ``ppgbench fit`` (suite spec, :class:`BenchmarkRun`).

    With ``dry_run`` set, print what ``ppgbench fit --dry-run`` prints (the plan, the real run's refusals of
    the folder, the cost estimate) and return None.
    """
    from ppgbench_pl.benchmark.console import quiet_lightning
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun
    from ppgbench_pl.benchmark.spec import RunSettings, build_suite_spec
    from ppgbench_pl.locks import waiting_at_most

    lock_timeout = config.pop("lock_timeout", None)  # how to wait, not what is computed: not in run.json
    dry_run = bool(config.pop("dry_run", False))  # what to do with the config, not part of it
    threads = config.pop("threads", None)  # how many threads, not what is computed: recorded apart
    spec = build_suite_spec(config)
    built = [e for e in (*spec["encoders"], *spec["regimes"]) if "instance" in e]
    if built and config["executor"]["class_path"] != LOCAL_EXECUTOR:
        names = ", ".join(e["class_path"] for e in built)
        raise ConfigError(f"{len(built)} built object(s) ({names}) live in this process and run only with "
                          "the local executor; give them by name or class path instead")
    wandb = config["wandb"]
    if isinstance(wandb, bool):
        wandb = "group" if wandb else "off"
    settings = RunSettings(config["output_dir"], config["executor"], wandb, config["wandb_project"],
                           config["ci_unit"], bool(config["progress"]), bool(config["allow_code_change"]),
                           float(config["max_cache_gb"]))
    if settings.max_cache_gb <= 0:
        raise ConfigError(f"max_cache_gb must be positive, got {settings.max_cache_gb}")
    quiet_lightning()
    if dry_run:
        print(BenchmarkRun(spec, settings, config, threads=threads).dry_run())
        return None
    with waiting_at_most(lock_timeout):
        report = BenchmarkRun(spec, settings, config, threads=threads).run()
    if report.interrupted is not None:
        raise KeyboardInterrupt(f"interrupted after {report.completed + report.skipped} of {report.planned} "
                                "jobs; call evaluate again to resume")
    if report.skipped:  # a resumed folder: say what was reused (the CLI's last line says it too)
        print(f"resumed {settings.output_dir}: {report.skipped} of {report.planned} jobs reused (already done), "
              f"{report.completed} run", file=sys.stderr)
    if report.failed:
        warnings.warn(f"{len(report.failed)} of {report.planned} jobs failed (Results.failed lists them; "
                      "they run again next time)", stacklevel=3)
    return Results(settings.output_dir, run=report)
