"""The neural regimes' Optuna spaces (PROTOCOL.md 4.3, 4.4, 6: ``aggregation_idx``), every parameter categorical."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution

from ppgbench_pl.errors import ConfigError

MLP_SPACE: dict[str, list[Any]] = {
    "hidden_dim": [256, 512],
    "dropout": [0.0, 0.3],
    "lr": [1e-5, 1e-4, 1e-3, 5e-3, 1e-2],
    "weight_decay": [0.0],
    "batch_size": [16, 32, 64, 128],
    "activation": ["gelu"],
}

FINETUNE_SPACE: dict[str, list[Any]] = {
    "hidden_dim": [256],
    "head_dropout": [0.0, 0.3],
    "head_lr": [1e-3, 1e-4, 1e-5],
    "encoder_lr_ratio": [0.1, 0.01],
    "head_weight_decay": [0.0, 1e-4],
    "encoder_weight_decay_ratio": [1.0],
    "batch_size": [128, 512, 1024, 2048],
    "activation": ["gelu"],
    "batchnorm_mode": ["train", "freeze_stats"],
}

AGGREGATION_PARAM = "aggregation_idx"


def build_space(base: Mapping[str, Sequence[Any]], overrides: Mapping[str, Sequence[Any]] | None = None,
                aggregations: Sequence[str] = ()) -> dict[str, list[Any]]:
    """The protocol space with user overrides (``ConfigError`` if unknown or empty), plus ``aggregation_idx``."""
    space = {name: list(values) for name, values in base.items()}
    for name, values in (overrides or {}).items():
        if name not in space:
            raise ConfigError(f"search_space: unknown parameter '{name}'; known: {', '.join(space)}")
        if not values:
            raise ConfigError(f"search_space: parameter '{name}' needs at least one value")
        space[name] = list(values)
    if aggregations:
        space[AGGREGATION_PARAM] = list(range(len(aggregations)))
    return space


def distributions(space: Mapping[str, Sequence[Any]]) -> dict[str, BaseDistribution]:
    """One categorical distribution per parameter, for ``study.ask(fixed_distributions=...)``."""
    return {name: CategoricalDistribution(list(values)) for name, values in space.items()}
