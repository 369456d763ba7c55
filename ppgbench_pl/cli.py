"""The ``ppgbench`` command: a thin LightningCLI for ``fit`` plus small utility subcommands.

``ppgbench fit --config configs/quickstart.yaml`` builds every component from YAML by ``class_path``
(configs stack; ``--print_config`` works) and hands them to :func:`ppgbench_pl.benchmark.fit.run_fit`.
The other subcommands (``list``, ...) live in :mod:`ppgbench_pl.commands`.
"""

from __future__ import annotations

import re
import sys
from typing import Any, NoReturn

from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from ppgbench_pl.benchmark.fit import quiet_lightning
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.tasks.encoder_task import EncoderTask

_SPECIFIC = re.compile(
    r"unknown (task|dataset|encoder|regime)|has no attribute|No module named|not found|needs at least|"
    r"must be|does not|belongs to|out of range|not a subclass|Unable to load config|Invalid|unexpected"
)


def one_line(message: str) -> str:
    """The most specific line of a nested jsonargparse error (our own messages win)."""
    lines = [ln.strip().lstrip("-").strip() for ln in str(message).splitlines() if ln.strip()]
    for line in lines:
        if _SPECIFIC.search(line):
            return line
    return lines[0] if lines else "invalid arguments"


#: Subcommands handled by :mod:`ppgbench_pl.commands` (everything else goes to LightningCLI).
UTILITY_COMMANDS = ("list", "download", "preprocess", "report", "init", "benchmark")


class OneLineErrorParser(LightningArgumentParser):
    """Reports a parse or validation error as a single line instead of nested union-type dumps."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:  # noqa: D102
        if not self.exit_on_error:  # jsonargparse parses speculatively and expects the exception
            super().error(message, ex)
        print(f"ppgbench: error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(2)


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
        parser_class=OneLineErrorParser,
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
    quiet_lightning()
    try:
        if argv and argv[0] in UTILITY_COMMANDS:
            from ppgbench_pl.commands import dispatch

            dispatch(argv)
        else:
            build_cli(None if args is None else argv)
    except Exception as exc:  # noqa: BLE001 - a user error anywhere in the chain becomes one line
        cause = _user_error(exc)
        if cause is None:
            raise
        print(f"ppgbench: error: {one_line(str(cause))}", file=sys.stderr)
        raise SystemExit(2) from None


def _user_error(exc: BaseException) -> BaseException | None:
    """The :class:`PPGBenchError` behind ``exc`` (jsonargparse wraps errors raised while instantiating)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PPGBenchError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
