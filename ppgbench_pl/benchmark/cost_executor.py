"""Where the estimated jobs run: the executor's parallel slots, each job's torch threads, CPU or GPU.

Read from the executor's config entry and the trainer settings without building anything (a dry run
must not start a pool or contact a scheduler).
"""

from __future__ import annotations

import inspect
import os
from typing import Any


def _executor_args(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(executor name, its init args with the class's defaults) from its entry, without building it."""
    from ppgbench_pl.naming import import_class

    cls = import_class(entry["class_path"])
    params = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()}
    return cls.__name__.removesuffix("Executor").lower() or cls.__name__, {**params, **(entry.get("init_args") or {})}


def executor_slots(entry: dict[str, Any]) -> tuple[str, int]:
    """(executor name, jobs it runs at once) from its entry, without building it."""
    name, args = _executor_args(entry)
    if "workers" in args and args["workers"] is None:  # the process pool's default: one per core (per GPU)
        from ppgbench_pl.benchmark.thread_policy import usable_cores

        return name, len(args.get("gpus") or ()) or usable_cores()
    for key in ("workers", "parallelism"):
        if isinstance(args.get(key), int):
            return name, max(int(args[key]), 1)
    return name, 1


def job_threads(entry: dict[str, Any]) -> int:
    """Torch threads a job gets: the process pool splits the cores, the local executor leaves torch's default.

    Torch's default is ``OMP_NUM_THREADS`` when set, else the cores; a cluster job's threads are its
    ``cpus_per_task`` (1 when not given).
    """
    name, args = _executor_args(entry)
    from ppgbench_pl.benchmark.thread_policy import usable_cores

    cores = usable_cores()
    if name == "local":
        env = os.environ.get("OMP_NUM_THREADS", "")
        return max(int(env), 1) if env.isdigit() else cores
    if isinstance(args.get("threads_per_worker"), int):
        return max(int(args["threads_per_worker"]), 1)
    if name == "process":
        return max(1, cores // max(int(args.get("workers") or cores), 1))
    params = args.get("parameters") or {}
    cpus = params.get("cpus_per_task") or params.get("slurm_cpus_per_task") if isinstance(params, dict) else None
    return int(cpus) if isinstance(cpus, int) else 1


def on_gpu(trainer_kwargs: dict[str, Any]) -> bool:
    """Whether the neural regimes and the embedding pass would run on a CUDA GPU."""
    accelerator = str(trainer_kwargs.get("accelerator") or "auto")
    if accelerator == "cpu":
        return False
    import torch

    return accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available()
