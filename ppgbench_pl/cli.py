"""The ``ppgbench`` command: a thin LightningCLI for ``fit`` plus small utility subcommands.

``ppgbench fit --config configs/quickstart.yaml`` builds every component from YAML by ``class_path``
(configs stack; ``--print_config`` works) and hands them to :func:`ppgbench_pl.benchmark.fit.run_fit`.
The other subcommands (``list``, ...) live in :mod:`ppgbench_pl.commands`.
"""

from __future__ import annotations

import sys
from typing import Any

from lightning.pytorch.cli import LightningCLI

from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.tasks.encoder_task import EncoderTask


class PPGBenchCLI(LightningCLI):
    """LightningCLI whose ``fit`` runs the evaluation protocol instead of a single ``Trainer.fit``."""

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """Only ``fit``: validate/test/predict have no meaning for a protocol run."""
        return {"fit": {"model", "train_dataloaders", "val_dataloaders", "datamodule"}}

    def add_arguments_to_parser(self, parser: Any) -> None:
        """Run-level options next to model/data/trainer."""
        parser.add_argument("--output_dir", type=str, default="results/run", help="Run folder (resumable).")
        parser.add_argument("--controls", type=list[PPGEncoder], default=[],
                            help="Extra encoders evaluated under the same plan (PRV, MOMENT, ...).")
        parser.add_argument("--ci_unit", type=str, default="seed", help="'seed' (published) or 'fold'.")
        parser.add_argument("--progress", type=bool, default=True, help="Show a progress bar over jobs.")

    def fit(self, model: EncoderTask, datamodule: PPGDataModule, **_: Any) -> None:
        """Run the protocol (see :func:`ppgbench_pl.benchmark.fit.run_fit`)."""
        from ppgbench_pl.benchmark.fit import run_fit

        cfg = self.config_init[self.subcommand]
        trainer_cfg = self.config[self.subcommand]["trainer"]
        trainer_kwargs = {k: trainer_cfg[k] for k in ("accelerator", "devices", "precision") if trainer_cfg.get(k) is not None}
        config = self.parser.dump(self.config, skip_none=False, format="parser_mode")
        report = run_fit(self.trainer, model, datamodule, cfg["controls"], cfg["output_dir"],
                         {"yaml": config}, trainer_kwargs, cfg["ci_unit"], cfg["progress"])
        if report.failed:
            raise SystemExit(1)


def build_cli(args: list[str] | None = None, run: bool = True) -> PPGBenchCLI:
    """Build the LightningCLI (``run=False`` to only instantiate, e.g. in tests)."""
    return PPGBenchCLI(
        EncoderTask,
        PPGDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        auto_configure_optimizers=False,
        seed_everything_default=42,
        args=args,
        run=run,
    )


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``ppgbench`` script; user errors become one line and exit status 2."""
    argv = list(sys.argv[1:] if args is None else args)
    try:
        if argv and argv[0] in ("list",):
            from ppgbench_pl.commands import dispatch

            dispatch(argv)
        else:
            build_cli(argv)
    except PPGBenchError as exc:
        print(f"ppgbench: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
