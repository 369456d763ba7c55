"""``ppgbench fit``/``benchmark``: one LightningCLI builds the objects once; a worker reparses with it."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Literal, NoReturn

import lightning as L
from jsonargparse import Namespace
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from ppgbench_pl.benchmark.budget import Budget
from ppgbench_pl.benchmark.executors import Executor, LocalExecutor
from ppgbench_pl.benchmark.setup import ProtocolSetup, build_setup
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError, user_error
from ppgbench_pl.messages import fail, one_line, unknown_flags
from ppgbench_pl.tasks.encoder_task import EncoderTask


class ProtocolTrainer(L.Trainer):
    """The ``trainer`` block of a protocol run: its device settings reach every inner trainer."""

    benchmark = L.Trainer.fit  # the ``benchmark`` subcommand takes the same arguments as ``fit``


class OneLineErrorParser(LightningArgumentParser):
    """Reports a parse or validation error as a single line instead of nested union-type dumps."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:  # noqa: D102
        if not self.exit_on_error:  # jsonargparse parses speculatively and expects the exception
            super().error(message, ex)
        fail(unknown_flags(one_line(message), self._option_string_actions))

    def format_help(self, formatter: Any = None) -> str:  # noqa: D102 - ours first, refused flags in one line
        from ppgbench_pl.benchmark.trainer_block import protocol_help

        return protocol_help(self, lambda: super(OneLineErrorParser, self).format_help(formatter))


class PPGBenchCLI(LightningCLI):
    """LightningCLI whose ``fit`` and ``benchmark`` run the evaluation protocol (no single ``Trainer.fit``)."""

    exit_code: int = 0

    def __init__(self, *args: Any, command: str | None = None, **kwargs: Any) -> None:
        """``command``: the subcommand being parsed; only its parser is built (each costs tenths of a second)."""
        self.command = command
        super().__init__(*args, **kwargs)

    def subcommands(self) -> dict[str, set[str]]:  # type: ignore[override]
        """``fit`` and ``benchmark`` (or the one being parsed): validate/test/predict mean nothing here."""
        skip = {"model", "train_dataloaders", "val_dataloaders", "datamodule"}
        return {name: skip for name in ("fit", "benchmark") if self.command in (None, name)}

    def add_arguments_to_parser(self, parser: Any) -> None:
        """Run-level options next to model/data/trainer."""
        parser.add_argument("--output_dir", type=str, default="results/run", help="Run folder (resumable).")
        parser.add_argument("--controls", type=list[PPGEncoder], default=[],
                            help="Controls evaluated under the same plan (published PRV, MOMENT, ...).")
        parser.add_argument("--matrix.encoders", type=list[PPGEncoder] | None, default=None,
                            help="More models under test, each evaluated like model.init_args.encoder.")
        parser.add_argument("--matrix.datasets", type=list[str] | None, default=None,
                            help="Datasets to evaluate (instead of data.init_args.dataset).")
        parser.add_argument("--matrix.tasks", type=list[str] | None, default=None,
                            help="Task names across the matrix's datasets (default: all of them).")
        parser.add_argument("--budget", type=Budget, default=Budget(),
                            help="How much of the protocol to spend: stack configs/budget/smoke.yaml or "
                                 "published.yaml (name, n_trials, n_startup_trials, max_epochs, subject_repeats).")
        parser.add_argument("--executor", type=Executor,
                            default={"class_path": f"{LocalExecutor.__module__}.LocalExecutor"},
                            help="local | process | submitit | dask, or a class_path with init_args.")
        parser.add_argument("--wandb", type=Literal["group", "per-job", "off"] | bool, default="group",
                            help="W&B runs per (model, task, regime) cell, per job as well, or none.")
        parser.add_argument("--wandb_project", type=str, default="ppgbench", help="W&B project.")
        parser.add_argument("--ci_unit", type=Literal["seed", "fold"], default="seed",
                            help="CI over the seed means (published) or over all folds.")
        parser.add_argument("--progress", type=bool, default=True, help="Progress on stderr.")
        parser.add_argument("--allow_code_change", type=bool, default=False,
                            help="Resume a run folder made by another version of the source (recorded).")
        parser.add_argument("--cache_dir", type=str | None, default=None,
                            help="The shared embedding cache (default $PPGBENCH_CACHE_DIR, else "
                                 "~/.cache/ppgbench/embeddings); see ppgbench cache list.")
        parser.add_argument("--cache_size_gb", type=float | None, default=None,
                            help="Size cap of the whole embedding cache, least recently used entries evicted "
                                 "(default $PPGBENCH_CACHE_GB, else 100).")
        parser.add_argument("--max_cache_gb", type=float, default=50.0,
                            help="Refuse an embedding-cache entry estimated above this size.")
        parser.add_argument("--optuna_storage", type=str | None, default=None,
                            help="Optuna storage URL for every searching regime (may hold {job_id}, {repeat}).")
        parser.add_argument("--only_encoders", type=list[str] | None, default=None, help="Run only these encoders.")
        parser.add_argument("--only_regimes", type=list[str] | None, default=None, help="Run only these regimes.")
        parser.add_argument("--lock_timeout", type=float | None, default=None,
                            help="Give up after this many seconds waiting for a lock another process holds (a "
                                 "job, a cache entry); default: wait. Also $PPGBENCH_LOCK_TIMEOUT.")
        parser.add_argument("--threads", type=int | None, default=None,
                            help="Torch/BLAS threads per process for every workload (default: 1 for probe jobs, "
                                 "every core for encoder passes; also $PPGBENCH_THREADS; recorded in run.json).")
        parser.add_argument("--dry_run", "--dry-run", action="store_true", help="Print the plan, then exit.")
        parser.add_argument("--fetch_weights", action="store_true",
                            help="Fetch a published model's missing weights (no checkpoint given) into the weights "
                                 "cache, as `ppgbench download --weights` does; without it they must be there.")
        parser.add_argument("--weights_dir", type=str | None, default=None,
                            help="The weights cache (default $PPGBENCH_WEIGHTS_DIR, else ~/.cache/ppgbench/weights).")

    def _parse_ckpt_path(self) -> None:
        """``--ckpt_path`` would resume a single Trainer.fit; a protocol run has none, so it is refused."""
        sub = self.config.get("subcommand")
        if sub and self.config[sub].get("ckpt_path"):
            raise ConfigError("--ckpt_path has no meaning for a protocol run (each job trains its own heads); "
                              "give weights to the encoder: --model.init_args.encoder.init_args.checkpoint PATH")
        if sub and self.config[sub].get("weights_only") is not None:
            raise ConfigError("--weights_only has no meaning for a protocol run; checkpoints are always "
                              "loaded with an allow-list (see the encoder's checkpoint option)")

    def instantiate_classes(self) -> None:
        """Build the run's objects once: encoders (on first use), datamodules, regimes, callbacks, budget, executor."""
        sub = self.config.get("subcommand")
        parser, cfg = (self._parser(sub), self.config[sub]) if sub else (self.parser, self.config)
        self.setup: ProtocolSetup = build_setup(parser, cfg, lambda c: _instantiate(parser, c),
                                                f"{__name__}.suite_of_resolved")

    def _run_subcommand(self, subcommand: str) -> None:
        """Run the setup (or print its plan)."""
        from ppgbench_pl.benchmark.console import quiet_lightning
        from ppgbench_pl.benchmark.coordinator import BenchmarkRun
        from ppgbench_pl.benchmark.run_report import print_report
        from ppgbench_pl.locks import waiting_at_most

        run = BenchmarkRun(self.setup)
        if self.setup.settings.dry_run:
            print(run.dry_run())
            return
        quiet_lightning()
        with waiting_at_most(self.setup.actions["lock_timeout"]):
            report = run.run()
        print_report(report, Path(self.setup.settings.output_dir))
        self.exit_code = report.interrupted or (1 if report.failed else 0)


def _instantiate(parser: Any, cfg: Any) -> Any:
    """Build the config's classes once, as LightningCLI does, but the encoders; enum values as names (as dumped)."""
    _enum_names(cfg)
    cfg = cfg.clone()
    for key in ("model", "controls", "matrix.encoders"):
        if cfg.get(key) is not None:
            cfg[key] = None
    if cfg.get("matrix.datasets") is not None or cfg.get("matrix.tasks") is not None:
        cfg["data.init_args.tasks"] = None  # a matrix's tasks span datasets: the setup gives each dataset its own
    return parser.instantiate_classes(cfg)


def _enum_names(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, list):
        return [_enum_names(v) for v in value]
    if isinstance(value, Namespace):
        for key, item in list(value.items(branches=True)):
            value[key] = _enum_names(item)
    return value


def parse_setup(args: Any) -> ProtocolSetup:
    """The setup of a config (arguments or a dict) as ``ppgbench fit`` builds it; its refusal in one line."""
    try:
        return build_cli(args, run=False).setup
    except Exception as exc:
        from jsonargparse import ArgumentError

        cause = user_error(exc) or (entry_refusal(args) if isinstance(args, dict) else None)
        if cause is None and isinstance(exc, ArgumentError):
            cause = ConfigError(one_line(str(exc)))
        if cause is None:
            raise
        raise cause from None


def entry_refusal(config: dict[str, Any]) -> ConfigError | None:
    """The one-line refusal of the first ``trainer.callbacks`` entry that does not parse alone (not built)."""
    from jsonargparse import ArgumentError, ArgumentParser
    from lightning.pytorch.callbacks import Callback

    for entry in (config.get("trainer") or {}).get("callbacks") or []:
        if not isinstance(entry, dict):
            continue
        parser = ArgumentParser(exit_on_error=False)
        parser.add_argument("--obj", type=Callback)
        try:
            parser.parse_object({"obj": entry})
        except ArgumentError as exc:
            return ConfigError(entry_error(entry, str(exc)))
    return None


def entry_error(entry: dict[str, Any], message: str) -> str:
    """``regime linear (class path): 'nonsense' is not one of its settings (accepted: ...)``."""
    import inspect

    from ppgbench_pl.messages import did_you_mean
    from ppgbench_pl.naming import import_class

    path = str(entry.get("class_path"))
    try:
        cls = import_class(path)
    except (ImportError, AttributeError, ValueError):
        return f"regime {path}: {one_line(message).removeprefix('obj: ')}"
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    where = f"regime {getattr(cls, 'name', cls.__name__)} ({path})"
    given = entry.get("init_args") or {}
    unknown = [key for key in given if key not in accepted] if isinstance(given, dict) else []
    if unknown:
        return (f"{where}: '{unknown[0]}' is not one of its settings (accepted: {', '.join(accepted) or 'none'})"
                f"{did_you_mean(unknown[0], accepted)}")
    return f"{where}: {one_line(message).removeprefix('obj: ').removeprefix('obj.')}"


def suite_of_resolved(resolved: str) -> Any:
    """A worker's suite: the resolved config of the coordinator, parsed and built by this same parser."""
    try:
        return parse_setup(["--config", resolved]).suite
    except ConfigError as exc:  # reported as the job's error
        raise ConfigError(f"the run's resolved config does not parse in this worker: {exc}") from None


def build_cli(args: Any = None, run: bool = True) -> PPGBenchCLI:
    """Build the LightningCLI (``args``: argument list or a config dict; ``run=False`` only parses)."""
    command = args[0] if run and isinstance(args, list) and args and args[0] in ("fit", "benchmark") else None
    descriptions = {
        "fit": {"description": "Evaluate an encoder (and controls) under the protocol."},
        "benchmark": {"description": "Evaluate a matrix of encoders x datasets x regimes under the protocol."},
    }
    return PPGBenchCLI(
        EncoderTask,
        PPGDataModule,
        trainer_class=ProtocolTrainer,
        parser_class=OneLineErrorParser,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        auto_configure_optimizers=False,
        seed_everything_default=42,
        parser_kwargs={**{name: kw for name, kw in descriptions.items() if command in (None, name)},
                       **({} if run else {"exit_on_error": False})},  # parse_setup turns errors into ConfigError
        args=args,
        run=run,
        command=command,
    )
