"""The Python API: ``pb.evaluate`` runs a ``ppgbench fit`` config through the CLI's parser and engine (README)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.api_entries import (
    EncoderLike,
    RegimeLike,
    check_arguments,
    encoder_entry,
    executor_entry,
    regime_entry,
    split_overrides,
)
from ppgbench_pl.commands import EXECUTOR_ALIASES
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.exported_results import Results, load_run  # load_run: a folder or an export
from ppgbench_pl.input_checks import int_list

if TYPE_CHECKING:
    import pandas as pd


#: The published outer seeds and folds (PROTOCOL.md 3.1): 5 seeds x 5 subject-disjoint folds.
PUBLISHED_SEEDS: tuple[int, ...] = (42, 43, 44, 45, 46)
PUBLISHED_FOLDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: The published control evaluated next to every model (the SciPy PRV features, PROTOCOL.md 5.2).
PUBLISHED_CONTROLS: tuple[str, ...] = ("prv_published",)


def build_config(encoder: EncoderLike, *, dataset: str, tasks: Sequence[str] | None = None,
                 regimes: Iterable[RegimeLike] = ("linear",),
                 controls: Iterable[EncoderLike] = PUBLISHED_CONTROLS,
                 seeds: Sequence[int] = PUBLISHED_SEEDS, folds: Sequence[int] = PUBLISHED_FOLDS,
                 output_dir: str | Path = "results/api", executor: str | Mapping[str, Any] | None = None,
                 sampling_rate: float | None = None, name: str | None = None,
                 encoder_args: Mapping[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """Return the ``ppgbench fit`` config that :func:`evaluate` runs (same args; the parser adds the defaults)."""
    tasks, regimes, controls = check_arguments(dataset, tasks, regimes, controls, output_dir, overrides)
    run, data, trainer = split_overrides(overrides)
    return {
        "output_dir": str(output_dir),
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"encoder": encoder_entry(
            encoder, sampling_rate=sampling_rate, name=name, encoder_args=encoder_args)}},
        "controls": [encoder_entry(c) for c in controls],
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule", "init_args": {
            "dataset": dataset, "tasks": tasks,
            "seeds": int_list("seeds", seeds), "folds": int_list("folds", folds), **data}},
        # one device, as configs/base.yaml: the stacked regimes refuse "auto"
        "trainer": {"devices": 1, **trainer, "callbacks": [regime_entry(r) for r in regimes]},
        "executor": executor_entry(executor),
        **run,
    }


def evaluate(encoder: EncoderLike, *, dataset: str, tasks: Sequence[str] | None = None,
             regimes: Iterable[RegimeLike] = ("linear",),
             controls: Iterable[EncoderLike] = PUBLISHED_CONTROLS,
             seeds: Sequence[int] = PUBLISHED_SEEDS, folds: Sequence[int] = PUBLISHED_FOLDS,
             output_dir: str | Path = "results/api", executor: str | Mapping[str, Any] | None = None,
             sampling_rate: float | None = None, name: str | None = None,
             encoder_args: Mapping[str, Any] | None = None, **overrides: Any) -> Results | None:
    """Evaluate one encoder (and the controls) under the protocol, as ``ppgbench fit`` would; resumable.

    Args:
        encoder: A registered name (``"papagei_s"``, ``"small_cnn"``; see :func:`list_encoders`), a class
            path or ``class_path`` entry, a ``PPGEncoder`` class or instance, or any ``nn.Module`` (then
            ``sampling_rate`` is required; it is wrapped like
            :class:`~ppgbench_pl.encoders.custom.CustomEncoder`).
        dataset: Dataset key (``synthetic`` or one of the nine; see :func:`list_datasets`).
        tasks: Task names of that dataset (default: all of them; see :func:`list_tasks`).
        regimes: Regime names (``linear``, ``rf``, ``mlp``, ``finetune``), ``(name, init_args)`` pairs such as
            ``("mlp", {"search": {"n_trials": 4, "max_epochs": 3}})``, entry dicts or Regime instances.
        controls: Encoders evaluated beside it on the same folds (default: the published PRV control;
            ``()`` for none). The constant baseline is scored in every job anyway.
        seeds: Outer seeds (published: 42-46).
        folds: Outer folds (published: 0-4 of 5).
        output_dir: Run folder; a second call with the same settings skips every finished job.
        executor: ``None``/``"local"`` (this machine: jobs that train networks in forked copies of this process,
            one per core; ``{"class_path": "local", "init_args": {"workers": 1}}``: all here), ``"process"``,
            ``"submitit"``, ``"dask"`` or a ``class_path``/``init_args`` dict. Built objects (modules,
            instances) need the local executor.
        sampling_rate: Native rate of a plain ``nn.Module`` in Hz (else an encoder init argument).
        name: The encoder's name in job ids and tables.
        encoder_args: More encoder init arguments, e.g. ``{"random_init": True}`` for a published model
            without its checkpoint, ``{"checkpoint": "weights.pt"}``, or CustomEncoder settings for a module.
        **overrides: Run options as on the command line (``wandb``: ``group``/``per-job``/``off``,
            ``wandb_project``, ``ci_unit``, ``progress``, ``allow_code_change``, ``max_cache_gb``, ``cache_dir``,
            ``cache_size_gb``, ``optuna_storage``, ``threads``, ``lock_timeout``; ``dry_run=True`` prints the plan
            and its cost estimate as ``--dry-run`` does and returns None), data-module settings (``root``,
            ``batch_size``, ``n_inner_folds``, ``synthetic_subjects``, ...) and the trainer's device settings
            (``accelerator``, ``devices``, ``precision``, ...), as in a ``fit`` config.

    Returns:
        The run folder's :class:`Results` (every record in it, including earlier runs'); None for a dry run.

    Raises:
        ConfigError: A refused setting (one line, as the CLI would say it).
        KeyboardInterrupt: The run was interrupted (finished jobs are kept; call again to resume).

    """
    return run_config(build_config(encoder, dataset=dataset, tasks=tasks, regimes=regimes, controls=controls,
                                   seeds=seeds, folds=folds, output_dir=output_dir, executor=executor,
                                   sampling_rate=sampling_rate, name=name, encoder_args=encoder_args, **overrides))


def run_config(config: dict[str, Any]) -> Results | None:
    """Run a config as ``ppgbench fit`` does (same parser, same engine); with ``dry_run``, print its plan instead."""
    from ppgbench_pl.benchmark.console import quiet_lightning
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun
    from ppgbench_pl.benchmark.protocol_cli import parse_setup
    from ppgbench_pl.locks import waiting_at_most

    quiet_lightning()
    warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
    setup = parse_setup(config)  # the parser's refusal: a one-line ConfigError, not an exit
    if setup.resolved is None and setup.settings.executor.get("class_path") != EXECUTOR_ALIASES["local"]:
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


# -- what can be run -----------------------------------------------------------------------------------------
def _table(name: str, **filters: Any) -> pd.DataFrame:
    import pandas as pd

    from ppgbench_pl.commands.listing import catalog_tables

    return pd.DataFrame(catalog_tables(tables=(name,), **filters)[name])


def list_datasets() -> pd.DataFrame:
    """List the datasets (key, native rate, window, subjects, tasks, source, access, licence)."""
    return _table("datasets")


def list_tasks(dataset: str | None = None, tier: str | None = None, kind: str | None = None) -> pd.DataFrame:
    """List the tasks (type, level, tier, metric, classes), optionally of one dataset, tier or kind."""
    return _table("tasks", dataset=dataset, tier=tier, kind=kind)


def list_encoders() -> pd.DataFrame:
    """List the registered encoders (native rate, embedding size, parameters, weights, checkpoint)."""
    return _table("encoders")


def list_controls() -> pd.DataFrame:
    """List the controls (constant baseline, PRV features, MOMENT) and how a run asks for each."""
    return _table("controls")


def list_regimes() -> pd.DataFrame:
    """List the regimes (what each trains, tiers, default search budget)."""
    return _table("regimes")


__all__ = [
    "PUBLISHED_CONTROLS", "PUBLISHED_FOLDS", "PUBLISHED_SEEDS", "Results", "build_config", "evaluate",
    "list_controls", "list_datasets", "list_encoders", "list_regimes", "list_tasks", "load_run",
]
