"""From a parsed ``fit``/``benchmark`` config to the one suite spec the engine runs.

Both commands take the same config language (LightningCLI's ``model``/``controls``/``data``/``trainer``
blocks, regimes as ``trainer.callbacks``) plus an optional ``matrix`` of extra encoders and datasets.
This module turns it into a plain JSON-able *suite spec* (what every worker rebuilds the suite from)
and refuses, one line each, every setting the protocol cannot honour, so that nothing given is
silently ignored:

* ``trainer.*`` device settings (:data:`HONOURED_TRAINER`) reach every inner trainer and the embedding
  pass; everything else that differs from Lightning's default is refused with the reason;
* ``model.init_args`` other than ``encoder`` are chosen by each regime's search, so they are refused;
* ``trainer.callbacks`` holds the regimes and any other Lightning callback (attached to every trial's
  trainer and part of the run identity); ``trainer.logger`` is replaced by ppgbench's own tracking,
  ``ckpt_path`` has no meaning for a protocol run.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.input_checks import check_storage, int_list
from ppgbench_pl.lightning_trainer import normalise_precision

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
#: Keys of the suite spec (everything a worker needs to rebuild the suite).
SUITE_KEYS = ("encoders", "regimes", "callbacks", "datasets", "tasks", "seeds", "folds", "data", "trainer",
              "optuna_storage", "budget")
#: Data-module settings that are part of the suite (``dataset``/``tasks``/``seeds``/``folds`` are lifted out).
DATA_LIFTED = ("dataset", "tasks", "seeds", "folds")


@dataclass
class RunSettings:
    """How and where one command runs (not sent to workers).

    Args:
        output_dir: Run folder.
        executor: ``class_path``/``init_args`` entry of the executor.
        wandb: ``group``, ``per-job`` or ``off``.
        wandb_project: W&B project.
        ci_unit: ``seed`` (published) or ``fold``.
        progress: Progress on stderr.
        allow_code_change: Resume a folder whose jobs were made by another version of the source.
        max_cache_gb: Refuse an embedding cache (or synthetic tree) estimated above this size.
        dry_run: Print the plan and its size, read no data.
    """

    output_dir: str
    executor: dict[str, Any]
    wandb: str = "group"
    wandb_project: str = "ppgbench"
    ci_unit: str = "seed"
    progress: bool = True
    allow_code_change: bool = False
    max_cache_gb: float = 50.0
    dry_run: bool = False


def _trainer_defaults() -> dict[str, Any]:
    import lightning as L

    return {name: p.default for name, p in inspect.signature(L.Trainer.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _is_default(value: Any, default: Any) -> bool:
    if value is None or value == default:
        return True
    return isinstance(value, float) and isinstance(default, float) and math.isclose(value, default)


def trainer_settings(trainer: dict[str, Any]) -> dict[str, Any]:
    """The honoured device settings of a ``trainer`` block; every other non-default setting is refused.

    Raises:
        ConfigError: A setting the protocol run cannot honour (named, with the reason).
    """
    defaults = _trainer_defaults()
    for key, value in trainer.items():
        if key in HONOURED_TRAINER or key in ("callbacks", "logger"):
            continue
        if key in REFUSED_TRAINER:
            if not _is_default(value, defaults.get(key)):
                raise ConfigError(f"trainer.{key}={value!r}: {key} {REFUSED_TRAINER[key]}")
        elif not _is_default(value, defaults.get(key)):
            raise ConfigError(f"trainer.{key}={value!r}: not used by a protocol run; remove it")
    logger = trainer.get("logger")
    if logger not in (None, False, []):
        raise ConfigError("trainer.logger: ppgbench tracks every run itself (W&B per model x task x regime under "
                          "<output_dir>/wandb, records under <output_dir>/jobs); remove it and use --wandb "
                          "group|per-job|off and --wandb_project")
    settings = {k: trainer[k] for k in HONOURED_TRAINER if trainer.get(k) is not None}
    for key in ("devices", "num_nodes"):
        if isinstance(settings.get(key), str) and settings[key].lstrip("-").isdigit():
            settings[key] = int(settings[key])
    if isinstance(settings.get("devices"), str) and "," in settings["devices"]:  # "0,1": Lightning's GPU list
        settings["devices"] = [int(d) for d in settings["devices"].split(",") if d.strip()]
    _refuse_single_device_flags(settings)
    if settings.get("precision") is not None:
        settings["precision"] = normalise_precision(settings["precision"])
    return settings


def _refuse_single_device_flags(settings: dict[str, Any]) -> None:
    """Refuse the multi-process flags that no ppgbench training honours (each would hang or do nothing)."""
    if settings.get("num_nodes", 1) != 1:
        raise ConfigError(f"trainer.num_nodes={settings['num_nodes']!r}: a run trains on one node (Lightning would "
                          "wait forever for the other nodes' processes); spread jobs over machines with "
                          "--executor slurm or dask instead")
    if settings.get("sync_batchnorm"):
        raise ConfigError("trainer.sync_batchnorm=True: has no effect (every trial stack trains on one device, "
                          "each trial with its own BatchNorm statistics); remove it")


def callback_entries(callbacks: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(regimes, other Lightning callbacks) listed under ``trainer.callbacks``.

    Regimes say how each head is chosen and trained; any other callback runs in every trial of the neural
    regimes (each trial in a fit of its own unless the callback is stack-aware) and is part of the run identity.

    Raises:
        ConfigError: No regime, or an entry that is not a Lightning callback.
    """
    from lightning.pytorch.callbacks import Callback, EarlyStopping

    from ppgbench_pl.benchmark.entries import import_class
    from ppgbench_pl.regimes.base import Regime

    entries = [callbacks] if isinstance(callbacks, dict) else list(callbacks or [])
    regimes, others = [], []
    for entry in entries:
        cls = import_class(entry["class_path"])
        if isinstance(cls, type) and issubclass(cls, Regime):
            regimes.append(copy.deepcopy(entry))
        elif isinstance(cls, type) and issubclass(cls, Callback):
            others.append(copy.deepcopy(entry))
        else:
            raise ConfigError(f"trainer.callbacks: {entry['class_path']} is not a Lightning callback "
                              "(lightning.pytorch.callbacks.Callback)")
    if not regimes:
        raise ConfigError("no regime configured: list one under trainer.callbacks "
                          "(e.g. class_path: ppgbench_pl.regimes.LinearRegime)")
    _refuse_logging_callbacks(others)
    stoppers = [str(o["class_path"]) for o in others if issubclass(import_class(o["class_path"]), EarlyStopping)]
    if stoppers and any((r.get("init_args") or {}).get("refit") for r in regimes):
        raise ConfigError(f"trainer.callbacks: {stoppers[0]} beside refit: true: the refit trains the winner for its "
                          "best epoch count on all outer-training groups, with no validation score to watch; "
                          "drop one of the two")
    if others and not any(getattr(import_class(r["class_path"]), "trains_trials", False) for r in regimes):
        names = ", ".join(str(o["class_path"]) for o in others)
        raise ConfigError(f"trainer.callbacks: {names} would never run: callbacks attach to the trials of the mlp "
                          "and finetune regimes, and this config has neither")
    return regimes, others


def _refuse_logging_callbacks(entries: list[dict[str, Any]]) -> None:
    """Refuse, up front, the callbacks that cannot work in a trial's fit (each job would fail), with the reason.

    Everything else runs in every trial: per trial in a fit of its own unless it is stack-aware.
    """
    from lightning.pytorch.callbacks import (
        BatchSizeFinder,
        DeviceStatsMonitor,
        LearningRateFinder,
        LearningRateMonitor,
        ModelCheckpoint,
        ProgressBar,
    )

    from ppgbench_pl.benchmark.entries import import_class

    why = [((ModelCheckpoint, LearningRateMonitor, DeviceStatsMonitor), "needs a logger or checkpoints, which the "
            "trials' trainers do not have (ppgbench keeps each trial's best weights itself and tracks runs in W&B)"),
           ((BatchSizeFinder, LearningRateFinder), "tunes the batch size or learning rate, which are the search's "
            "parameters (set their values in the regime's search_space)"),
           ((ProgressBar,), "the trials' trainers run without a progress bar (ppgbench shows the run's progress "
            "itself: --progress)")]
    for entry in entries:
        cls = import_class(entry["class_path"])
        for classes, reason in why:
            if issubclass(cls, classes):
                raise ConfigError(f"trainer.callbacks: {entry['class_path']} {reason}; remove it")


def model_encoder(model: dict[str, Any] | None) -> dict[str, Any] | None:
    """The encoder entry of the ``model`` block; other task settings are refused (regimes choose them)."""
    if not model:
        return None
    from ppgbench_pl.benchmark.entries import import_class

    args = dict(model.get("init_args") or {})
    encoder = args.pop("encoder", None)
    cls = import_class(model["class_path"])
    params = inspect.signature(cls.__init__).parameters
    for key, value in args.items():
        default = params[key].default if key in params else inspect.Parameter.empty
        if key == "mode" and value in ("frozen", "finetune"):
            continue  # each regime sets the mode itself (frozen probes, end-to-end finetuning)
        if default is inspect.Parameter.empty or not _is_default(value, default):
            raise ConfigError(f"model.init_args.{key}={value!r}: chosen by each regime (its search or the "
                              "protocol), not by the model block; remove it")
    if encoder is None:
        raise ConfigError("model.init_args.encoder is required (class_path of a PPG encoder)")
    return dict(encoder)


def build_suite_spec(config: dict[str, Any]) -> dict[str, Any]:
    """The suite spec of a parsed ``fit``/``benchmark`` config (a JSON-able dict, see :data:`SUITE_KEYS`).

    Raises:
        ConfigError: A refused setting, an empty list, or duplicate names.
    """
    if config.get("seed_everything") not in (None, 42):  # LightningCLI's global seed: every job reseeds itself
        raise ConfigError(f"seed_everything={config['seed_everything']!r} has no effect: every job is seeded "
                          "from its outer seed, as published; choose those with data.init_args.seeds")
    matrix = config.get("matrix") or {}
    encoders = [e for e in [model_encoder(config.get("model"))] if e is not None]
    encoders += [dict(e) for e in (matrix.get("encoders") or [])]
    encoders += [dict(e) for e in (config.get("controls") or [])]
    if not encoders:
        raise ConfigError("no encoder to evaluate: set model.init_args.encoder (or matrix.encoders)")
    trainer = dict(config.get("trainer") or {})
    regimes, callbacks = callback_entries(trainer.get("callbacks"))
    data = dict((config.get("data") or {}).get("init_args") or {})
    lifted = {k: data.pop(k, None) for k in DATA_LIFTED}
    datasets = matrix.get("datasets")
    if datasets is not None:
        if not datasets:
            raise ConfigError("matrix.datasets is empty; list at least one dataset or leave it out")
        if lifted["dataset"] not in (None, "synthetic", *datasets):
            raise ConfigError(f"data.init_args.dataset={lifted['dataset']!r} is not in matrix.datasets "
                              f"{datasets}; drop one of the two")
    else:
        datasets = [lifted["dataset"] or "synthetic"]
    tasks = matrix.get("tasks") if matrix.get("tasks") is not None else lifted["tasks"]
    for key in ("seeds", "folds"):
        if lifted[key] is not None and len(lifted[key]) == 0:
            raise ConfigError(f"data.init_args.{key} is empty; give at least one (or leave it out for the default)")
        if lifted[key] is not None:
            lifted[key] = int_list(f"data.init_args.{key}", lifted[key])
    check_storage(config.get("optuna_storage"))
    if tasks is not None and len(tasks) == 0:
        raise ConfigError("the task list is empty; give at least one task (or leave it out for all)")
    if len(set(lifted["seeds"] or [])) != len(lifted["seeds"] or []):
        raise ConfigError(f"data.init_args.seeds has duplicates: {lifted['seeds']}")
    if len(set(lifted["folds"] or [])) != len(lifted["folds"] or []):
        raise ConfigError(f"data.init_args.folds has duplicates: {lifted['folds']}")
    spec = {
        "encoders": encoders, "regimes": regimes, "callbacks": callbacks, "datasets": list(datasets), "tasks": tasks,
        "seeds": lifted["seeds"], "folds": lifted["folds"], "data": data,
        "trainer": trainer_settings(trainer), "optuna_storage": config.get("optuna_storage"),
    }
    check_names(spec)
    from ppgbench_pl.benchmark.budget import apply_budget, budget_of
    from ppgbench_pl.benchmark.cache_store import cache_root, size_cap_bytes

    size_cap_bytes(config.get("cache_size_gb"))  # a bad cap is refused before anything runs
    # where the shared embedding cache is, fixed here so every worker uses the coordinator's (not identity)
    return {**apply_budget(spec, budget_of(config)), "cache_dir": str(cache_root(config.get("cache_dir"))),
            "cache_size_gb": config.get("cache_size_gb")}


def check_names(spec: dict[str, Any]) -> None:
    """Encoder and regime names must be unique (their job ids would collide), named in one line."""
    from ppgbench_pl.benchmark.entries import encoder_info, regime_name

    for kind, names in (("encoder", [encoder_info(e).name for e in spec["encoders"]]),
                        ("regime", [regime_name(r) for r in spec["regimes"]])):
        twice = sorted(n for n, c in Counter(names).items() if c > 1)
        if twice:
            raise ConfigError(f"{kind} names must be unique, got {', '.join(twice)} more than once "
                              "(give one of them another name: init_args.name)")


def pick(spec: dict[str, Any], only_encoders: list[str] | None, only_regimes: list[str] | None) -> dict[str, Any]:
    """The spec narrowed to some encoders and regimes by name (``--only_encoders``/``--only_regimes``)."""
    from ppgbench_pl.benchmark.entries import encoder_info, regime_name

    out = dict(spec)
    for key, wanted, name_of in (("encoders", only_encoders, lambda e: encoder_info(e).name),
                                 ("regimes", only_regimes, regime_name)):
        if wanted is None:
            continue
        if not wanted:
            raise ConfigError(f"--only_{key} is empty; name at least one of the config's {key}")
        names = [name_of(e) for e in spec[key]]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise ConfigError(f"unknown {key[:-1]} {', '.join(unknown)}; the config has {', '.join(names)}")
        out[key] = [e for e, n in zip(spec[key], names, strict=True) if n in wanted]
    return out
