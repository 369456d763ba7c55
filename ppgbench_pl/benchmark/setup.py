"""From what LightningCLI parsed and built to a :class:`ProtocolSetup`: checked together, capped, assembled."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jsonargparse import Namespace

from ppgbench_pl.benchmark.budget import Budget, apply_budget
from ppgbench_pl.benchmark.executors import Executor
from ppgbench_pl.benchmark.suite import BenchmarkSuite, encoder_info
from ppgbench_pl.benchmark.trainer_block import model_encoder, split_callbacks, trainer_settings
from ppgbench_pl.data.registry import get_dataset, get_task, tasks_of
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.input_checks import check_storage

#: Options that say what to do with a config, not what the run is (left out of run.json).
ACTIONS = ("dry_run", "only_encoders", "only_regimes", "print_config", "config", "lock_timeout", "fetch_weights",
           "weights_dir", "threads")
#: Arguments of the ``fit`` subcommand that no protocol run uses (refused when set; not in a worker's config).
FIT_ONLY = ("ckpt_path", "weights_only")
#: Actions a worker needs to rebuild the same suite (which encoders and regimes the run picked).
PICKS = ("only_encoders", "only_regimes")


@dataclass
class RunSettings:
    """How and where one command runs (not sent to workers)."""

    output_dir: str
    executor: dict[str, Any]
    wandb: str = "group"
    wandb_project: str = "ppgbench"
    ci_unit: str = "seed"
    progress: bool = True
    allow_code_change: bool = False
    max_cache_gb: float = 50.0
    dry_run: bool = False


@dataclass
class ProtocolSetup:
    """One command; ``resolved``: what a worker parses (with ``parse``), None for objects built in this process."""

    suite: BenchmarkSuite
    settings: RunSettings
    executor: Executor
    config: dict[str, Any]
    resolved: str | None
    actions: dict[str, Any] = field(default_factory=dict)
    parse: str | None = None


def _datamodules(cfg: Namespace, data: PPGDataModule) -> tuple[dict[str, PPGDataModule], dict[str, list[str] | None]]:
    """One datamodule per selected dataset: the built one, and siblings with its settings for the matrix's others."""
    datasets = cfg.get("matrix.datasets")
    dataset = cfg.get("data.init_args.dataset")
    if datasets is not None:
        if not datasets:
            raise ConfigError("matrix.datasets is empty; list at least one dataset or leave it out")
        if dataset not in (None, "synthetic", *datasets):
            raise ConfigError(f"data.init_args.dataset={dataset!r} is not in matrix.datasets {datasets}; "
                              "drop one of the two")
    tasks = cfg.get("matrix.tasks") if cfg.get("matrix.tasks") is not None else cfg.get("data.init_args.tasks")
    if tasks is not None and len(tasks) == 0:
        raise ConfigError("the task list is empty; give at least one task (or leave it out for all)")
    datasets = list(datasets) if datasets is not None else [dataset or "synthetic"]
    specs = [get_task(t) for t in tasks] if tasks else []
    for d in datasets:
        get_dataset(d)
    outside = sorted({s.name for s in specs if s.dataset not in datasets})
    if outside:
        raise ConfigError(f"tasks {', '.join(outside)} belong to datasets not selected ({', '.join(datasets)})")
    selection: dict[str, list[str] | None] = {}  # dataset -> selected task names (None: all of its tasks)
    for d in dict.fromkeys(datasets):
        names = [s.name for s in specs if s.dataset == d]
        if specs and not names:
            raise ConfigError(f"dataset '{d}' has none of the selected tasks; drop it or add one of its tasks")
        selection[d] = names or None
    args = (cfg.get("data.init_args") or Namespace()).as_dict()
    have = (data.dataset, [t.name for t in data.task_specs])
    out = {name: data if have == (name, names or [t.name for t in tasks_of(name)])
           else type(data)(**{**args, "dataset": name, "tasks": names}) for name, names in selection.items()}
    return out, selection


def pick(items: list[Any], names: list[str], wanted: list[str] | None, kind: str) -> list[int]:
    """Positions of ``items`` kept by ``--only_<kind>`` (all when not given)."""
    if wanted is None:
        return list(range(len(items)))
    if not wanted:
        raise ConfigError(f"--only_{kind} is empty; name at least one of the config's {kind}")
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        raise ConfigError(f"unknown {kind[:-1]} {', '.join(unknown)}; the config has {', '.join(names)}")
    return [i for i, n in enumerate(names) if n in wanted]


def build_suite(cfg: Namespace, init: Namespace, config: dict[str, Any], encoders: list[Any]) -> BenchmarkSuite:
    """The suite of a parsed (``cfg``), instantiated (``init``) and dumped (``config``) config; entries as dumped."""
    from ppgbench_pl.benchmark.plan import check_unique  # not at the top: the order of imports orders --help's lists

    if cfg.get("seed_everything") not in (None, 42):  # LightningCLI's global seed: every job reseeds itself
        raise ConfigError(f"seed_everything={cfg.get('seed_everything')!r} has no effect: every job is seeded "
                          "from its outer seed, as published; choose those with data.init_args.seeds")
    first = ((config.get("model") or {}).get("init_args") or {}).get("encoder")  # as dumped, in the same order
    as_dumped = [e for e in [first] if e is not None] + list((config.get("matrix") or {}).get("encoders") or []) \
        + list(config.get("controls") or [])
    entries = [d if isinstance(p, Namespace) else p for p, d in zip(encoders, as_dumped, strict=True)]
    regimes, callbacks = split_callbacks(list(init.get("trainer.callbacks") or []))
    trainer = trainer_settings((cfg.get("trainer") or Namespace()).as_dict())  # it skips the callbacks
    check_storage(cfg.get("optuna_storage"))
    datamodules, selection = _datamodules(cfg, init.data)
    encoder_names = [encoder_info(e).name for e in entries]
    check_unique("encoder", encoder_names)
    check_unique("regime", [r.name for r in regimes])
    entries = [entries[i] for i in pick(entries, encoder_names, cfg.get("only_encoders"), "encoders")]
    regimes = [regimes[i] for i in pick(regimes, [r.name for r in regimes], cfg.get("only_regimes"), "regimes")]
    budget = init.get("budget") or Budget()
    apply_budget(regimes, budget, list(datamodules.values()), cfg.get("optuna_storage"))
    built = list(init.get("trainer.callbacks") or [])
    dumped = (config.get("trainer") or {}).get("callbacks") or []
    others = [entry for entry, obj in zip(dumped if isinstance(dumped, list) else [dumped], built, strict=True)
              if obj in callbacks]
    return BenchmarkSuite(entries, regimes, datamodules, callbacks=callbacks, trainer=trainer, budget=budget,
                          callback_entries=others, selection=selection, cache_dir=cfg.get("cache_dir"),
                          cache_size_gb=cfg.get("cache_size_gb"), run_dir=cfg.get("output_dir"))


def build_setup(parser: Any, cfg: Namespace, instantiate: Any, parse: str | None = None) -> ProtocolSetup:
    """Check and build one protocol command from its parsed config (``instantiate`` builds the classes)."""
    from ppgbench_pl.benchmark.weights import fill_checkpoints
    from ppgbench_pl.tasks.encoder_task import EncoderTask

    model = cfg.get("model")  # the encoders in run order: the model under test, the matrix's encoders, the controls
    first = model_encoder(model.as_dict() if isinstance(model, Namespace) else model, EncoderTask)
    encoders = ([cfg["model.init_args.encoder"]] if first is not None else []) \
        + list(cfg.get("matrix.encoders") or []) + list(cfg.get("controls") or [])
    if not encoders:
        raise ConfigError("no encoder to evaluate: set model.init_args.encoder (or matrix.encoders)")
    fill_checkpoints([e for e in encoders if isinstance(e, Namespace)], cfg.get("weights_dir"),  # none given: cached
                     fetch=bool(cfg.get("fetch_weights")), dry_run=bool(cfg.get("dry_run")))
    init = instantiate(cfg)
    built = [e for e in [*encoders, *(cfg.get("trainer.callbacks") or [])] if not isinstance(e, Namespace)]
    resolved: str | None = None
    if built:  # objects built in this process (the Python API): no text can carry them to another process
        config = _described(cfg)
    else:
        config = json.loads(parser.dump(cfg, format="json", skip_none=False, skip_validation=True))
        resolved = json.dumps({k: v for k, v in config.items() if (k not in ACTIONS or k in PICKS)
                               and k not in FIT_ONLY}, sort_keys=True)
    actions = {k: config.pop(k, cfg.get(k)) for k in ACTIONS}
    for key in FIT_ONLY:
        config.pop(key, None)
    suite = build_suite(cfg, init, config, encoders)
    wandb = cfg.get("wandb")  # how the command runs (folder, W&B, reporting)
    wandb = ("group" if wandb else "off") if isinstance(wandb, bool) else wandb
    settings = RunSettings(str(cfg.get("output_dir")), config.get("executor") or {}, str(wandb),
                           str(cfg.get("wandb_project")), str(cfg.get("ci_unit")), bool(cfg.get("progress")),
                           bool(cfg.get("allow_code_change")), float(cfg.get("max_cache_gb")), bool(cfg.get("dry_run")))
    if settings.max_cache_gb <= 0:
        raise ConfigError(f"--max_cache_gb must be positive, got {settings.max_cache_gb}")
    return ProtocolSetup(suite, settings, init.executor, config, resolved, actions, parse)


def _described(cfg: Namespace) -> dict[str, Any]:
    """The config as JSON where some entries are built objects (named by their class)."""
    def plain(value: Any) -> Any:
        if isinstance(value, Namespace):
            return {k: plain(v) for k, v in value.items(branches=True)}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        if value is None or isinstance(value, str | int | float | bool):
            return value
        path = f"{type(value).__module__}.{type(value).__qualname__}"
        return {"class_path": path, "instance": "built in this process"}

    return plain(cfg)
