"""The ``trainer`` and ``model`` blocks of a protocol run: device settings honoured, the rest refused (in --help)."""

from __future__ import annotations

import argparse
import inspect
import math
from collections.abc import Callable
from typing import Any

from lightning.pytorch import callbacks as cb

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.lightning_trainer import normalise_precision
from ppgbench_pl.regimes.base import Regime

#: Trainer settings applied to every inner trainer and the embedding pass.
HONOURED_TRAINER = ("accelerator", "strategy", "devices", "num_nodes", "precision", "deterministic",
                    "benchmark", "sync_batchnorm")
#: Trainer settings that change numbers (part of the run identity).
IDENTITY_TRAINER = ("precision", "deterministic", "benchmark", "sync_batchnorm")

_BUDGET = "is set by each regime's search budget (the regime's init_args); remove it"
_FIXED = "is fixed by the protocol for every inner trainer; remove it"
_INNER = "belongs to the inner trainers that each regime builds itself; remove it"
REFUSED_TRAINER = {
    **{k: _BUDGET for k in ("fast_dev_run", "max_epochs", "min_epochs", "max_steps", "min_steps", "max_time")},
    **{k: _FIXED for k in ("limit_train_batches", "limit_val_batches", "limit_test_batches",
                           "limit_predict_batches", "overfit_batches", "val_check_interval",
                           "check_val_every_n_epoch", "num_sanity_val_steps", "accumulate_grad_batches",
                           "gradient_clip_val", "gradient_clip_algorithm", "reload_dataloaders_every_n_epochs",
                           "use_distributed_sampler", "inference_mode")},
    **{k: _INNER for k in ("log_every_n_steps", "enable_checkpointing", "enable_progress_bar",
                           "enable_model_summary", "default_root_dir", "profiler", "detect_anomaly",
                           "barebones", "plugins", "enable_autolog_hparams", "model_registry")},
}
#: Callbacks that cannot work in a trial's fit, with the reason.
REFUSED_CALLBACKS = (
    ((cb.ModelCheckpoint, cb.LearningRateMonitor, cb.DeviceStatsMonitor), "needs a logger or checkpoints, which the "
     "trials' trainers do not have (ppgbench keeps each trial's best weights itself and tracks runs in W&B)"),
    ((cb.BatchSizeFinder, cb.LearningRateFinder), "tunes the batch size or learning rate, which are the search's "
     "parameters (set their values in the regime's search_space)"),
    ((cb.ProgressBar,), "the trials' trainers run without a progress bar (ppgbench shows the run's progress itself: "
     "--progress)"),
)


def _defaults(cls: Any) -> dict[str, Any]:
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _is_default(value: Any, default: Any) -> bool:
    if value is None or value == default:
        return True
    return isinstance(value, float) and isinstance(default, float) and math.isclose(value, default)


def trainer_settings(trainer: dict[str, Any]) -> dict[str, Any]:
    """The honoured device settings of a parsed ``trainer`` block; any other non-default one refused with why."""
    import lightning as L

    defaults = _defaults(L.Trainer)
    for key, value in trainer.items():
        if key in HONOURED_TRAINER or key in ("callbacks", "logger"):
            continue
        if not _is_default(value, defaults.get(key)):
            why = f"{key} {REFUSED_TRAINER[key]}" if key in REFUSED_TRAINER else "not used by a protocol run; remove it"
            raise ConfigError(f"trainer.{key}={value!r}: {why}")
    if trainer.get("logger") not in (None, False, []):
        raise ConfigError("trainer.logger: ppgbench tracks every run itself (W&B per model x task x regime under "
                          "<output_dir>/wandb, records under <output_dir>/jobs); remove it and use --wandb "
                          "group|per-job|off and --wandb_project")
    settings = {k: trainer[k] for k in HONOURED_TRAINER if trainer.get(k) is not None}
    for key in ("devices", "num_nodes"):
        if isinstance(settings.get(key), str) and settings[key].lstrip("-").isdigit():
            settings[key] = int(settings[key])
    if isinstance(settings.get("devices"), str) and "," in settings["devices"]:  # "0,1": Lightning's GPU list
        settings["devices"] = [int(d) for d in settings["devices"].split(",") if d.strip()]
    if settings.get("num_nodes", 1) != 1:
        raise ConfigError(f"trainer.num_nodes={settings['num_nodes']!r}: a run trains on one node (Lightning would "
                          "wait forever for the other nodes' processes); spread jobs over machines with "
                          "--executor slurm or dask instead")
    if settings.get("sync_batchnorm"):
        raise ConfigError("trainer.sync_batchnorm=True: has no effect (every trial stack trains on one device, "
                          "each trial with its own BatchNorm statistics); remove it")
    if settings.get("precision") is not None:
        settings["precision"] = normalise_precision(settings["precision"])
    return settings


def split_callbacks(callbacks: list[Any]) -> tuple[list[Regime], list[cb.Callback]]:
    """(regimes, other callbacks: run in every trial) of ``trainer.callbacks``; one that cannot run there refused."""
    regimes = [c for c in callbacks if isinstance(c, Regime)]
    others = [c for c in callbacks if not isinstance(c, Regime)]
    if not regimes:
        raise ConfigError("no regime configured: list one under trainer.callbacks "
                          "(e.g. class_path: ppgbench_pl.regimes.LinearRegime)")
    for other in others:
        path = f"{type(other).__module__}.{type(other).__qualname__}"
        if not isinstance(other, cb.Callback):
            raise ConfigError(f"trainer.callbacks: {path} is not a Lightning callback "
                              "(lightning.pytorch.callbacks.Callback)")
        for classes, reason in REFUSED_CALLBACKS:
            if isinstance(other, classes):
                raise ConfigError(f"trainer.callbacks: {path} {reason}; remove it")
    stoppers = [o for o in others if isinstance(o, cb.EarlyStopping)]
    if stoppers and any(getattr(r, "refit", False) for r in regimes):
        raise ConfigError(f"trainer.callbacks: {type(stoppers[0]).__module__}.{type(stoppers[0]).__qualname__} "
                          "beside refit: true: the refit trains the winner for its best epoch count on all "
                          "outer-training groups, with no validation score to watch; drop one of the two")
    if others and not any(r.trains_trials for r in regimes):
        names = ", ".join(f"{type(o).__module__}.{type(o).__qualname__}" for o in others)
        raise ConfigError(f"trainer.callbacks: {names} would never run: callbacks attach to the trials of the mlp "
                          "and finetune regimes, and this config has neither")
    return regimes, others


def model_encoder(model: dict[str, Any] | None, task_class: type) -> Any:
    """The encoder of the parsed ``model`` block; other task settings are refused (regimes choose them)."""
    if not model:
        return None
    args = dict(model.get("init_args") or {})
    encoder = args.pop("encoder", None)
    defaults = _defaults(task_class)
    for key, value in args.items():
        if key == "mode" and value in ("frozen", "finetune"):
            continue  # each regime sets the mode itself (frozen probes, end-to-end finetuning)
        if key not in defaults or not _is_default(value, defaults[key]):
            raise ConfigError(f"model.init_args.{key}={value!r}: chosen by each regime (its search or the "
                              "protocol), not by the model block; remove it")
    if encoder is None:
        raise ConfigError("model.init_args.encoder is required (class_path of a PPG encoder)")
    return encoder


#: Every refused destination: the refused ``Trainer`` arguments, then the other LightningCLI flags a run refuses.
REFUSED = [f"trainer.{key}" for key in REFUSED_TRAINER] + ["trainer.logger", "ckpt_path", "weights_only"]
REFUSED_TITLE = "Refused trainer flags"
#: The sections in the order the help shows them, each found by one argument it holds.
SECTION_ORDER = ("output_dir", "budget", "model", "data", "trainer")
USAGE = ("ppgbench {command} --config FILE [--config FILE ...] [--dry_run] [--output_dir DIR] [option ...]\n"
         "       (later configs and options override earlier ones; every option is below)")


def _section_rank(group: Any) -> float:
    if group.title == REFUSED_TITLE:
        return SECTION_ORDER.index("trainer") + 0.5  # right after the trainer's device settings
    dests = {action.dest for action in group._group_actions}
    return next((i for i, dest in enumerate(SECTION_ORDER) if dest in dests), len(SECTION_ORDER) + 1)


def protocol_help(parser: argparse.ArgumentParser, format_help: Callable[[], str]) -> str:
    """The help of a ``fit``/``benchmark`` parser as described above; any other parser's help unchanged."""
    if not any(action.dest == "output_dir" for action in parser._actions):
        return format_help()
    hidden = [a for a in parser._actions if a.dest in REFUSED or a.dest.removesuffix(".help") in REFUSED]
    present = [dest for dest in REFUSED if any(a.dest == dest for a in hidden)]
    saved_help = [(action, action.help) for action in hidden]
    groups, usage = list(parser._action_groups), parser.usage
    try:
        for action in hidden:
            action.help = argparse.SUPPRESS
        if present:  # one entry names them all
            inner = [d.removeprefix("trainer.") for d in present if d.startswith("trainer.") and d != "trainer.logger"]
            others = [f"--{d}" for d in present if not d.startswith("trainer.") or d == "trainer.logger"]
            names = ([f"--trainer.{{{', '.join(inner)}}}"] if inner else []) + others
            parser.add_argument_group(REFUSED_TITLE, ", ".join(names) + ": refused, each with its reason (epochs, "
                                      "steps and batches are set by each regime's search budget, the inner trainers "
                                      "are built by the regimes, and runs are tracked by ppgbench: --wandb; "
                                      "--trainer.logger takes only true or false)")
        parser._action_groups = sorted(parser._action_groups, key=_section_rank)
        parser.usage = USAGE.format(command=parser.prog.split()[-1])
        return format_help()
    finally:
        for action, text in saved_help:
            action.help = text
        parser._action_groups, parser.usage = groups, usage
