"""What ``ppgbench fit`` does once LightningCLI has built the components from YAML."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from ppgbench_pl.benchmark.runner import ProtocolRunner, RunReport
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import Regime
from ppgbench_pl.tasks.encoder_task import EncoderTask

QUIET_LOGGERS = ("lightning.pytorch", "lightning.fabric", "pytorch_lightning")
QUIET_WARNINGS = (
    r".*module\(s\) in eval mode.*",  # frozen encoders and freeze_stats BatchNorm are in eval mode on purpose
    ".*configure_optimizers.*returned.*None.*",
    ".*training_step.*returned.*None.*",
    ".*val_dataloader.*but have no.*validation_step.*",
    ".*LeafSpec.*",
    ".*does not have many workers.*",
)


def quiet_lightning() -> None:
    """Inner trainers run by the hundred; keep their banners and expected warnings out of the output.

    A probe has no optimiser and no validation step on purpose, frozen parts are in eval mode on purpose,
    and the in-memory loaders need no workers.
    """
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def run_fit(trainer: L.Trainer, model: EncoderTask, datamodule: PPGDataModule, controls: Sequence[PPGEncoder],
            output_dir: str, config: dict[str, Any], trainer_kwargs: dict[str, Any], ci_unit: str = "seed",
            progress: bool = True) -> RunReport:
    """Evaluate the model under test and the controls under every regime listed as a trainer callback."""
    regimes = [cb for cb in trainer.callbacks if isinstance(cb, Regime)]
    if not regimes:
        raise ConfigError("no regime configured: list one under trainer.callbacks "
                          "(e.g. class_path: ppgbench_pl.regimes.LinearRegime)")
    names = [r.name for r in regimes]
    if len(set(names)) != len(names):
        raise ConfigError(f"regime names must be unique, got {names}")
    quiet_lightning()
    datamodule.check(sorted({float(e.sampling_rate) for e in [model.encoder, *controls]}))
    runner = ProtocolRunner(output_dir, datamodule, [model.encoder, *controls], regimes,
                            trainer_kwargs=trainer_kwargs, loggers=trainer.loggers, config=config,
                            ci_unit=ci_unit, progress=progress)
    report = runner.run()
    print_report(report, Path(output_dir))
    return report


def print_report(report: RunReport, output_dir: Path) -> None:
    """A short account of the run on stdout, failures on stderr."""
    import pandas as pd

    if report.summary_path is not None and report.summary_path.exists():
        table = pd.read_csv(report.summary_path)
        if len(table):
            cols = ["model", "task", "regime", "metric", "mean", "ci_low", "ci_high", "n_seeds", "n_folds"]
            print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"{report.completed} jobs run, {report.skipped} already done, {len(report.failed)} failed "
          f"of {report.planned}; results in {output_dir}")
    for line in report.failed:
        print(f"failed: {line}", file=sys.stderr)
