"""Random-forest probe regime on frozen embeddings (PROTOCOL.md 4.2); the backend resolves when it is built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.probes.backends import forest_backend_for, resolve_backend
from ppgbench_pl.probes.families import ProbeFamily
from ppgbench_pl.probes.forest import (
    GRID_KEYS,
    MAX_DEPTH,
    MAX_FEATURES,
    MIN_SAMPLES_LEAF,
    MIN_SAMPLES_SPLIT,
    N_ESTIMATORS,
    ForestFamily,
)
from ppgbench_pl.regimes.base import JobContext, RepeatOutcome
from ppgbench_pl.regimes.linear import ProbeRegime


class RandomForestRegime(ProbeRegime):
    """Random forest, no scaling, no class weights, ``random_state`` = outer seed.

    Args:
        backend: ``auto`` (cuML when a GPU is usable, else scikit-learn), ``sklearn`` or ``cuml``.
        n_jobs: scikit-learn workers; results agree up to summation order, so it is not part of the run
            identity.
        n_estimators: Tree counts to search (published: 100).
        max_depth: Depths to search (published: 5, 10, 20).
        min_samples_split: Published: 2.
        min_samples_leaf: Published: 1.
        max_features: Published: ``sqrt``.
        binary_metric: Selection metric for binary tasks (``auroc`` as published).

    Raises:
        ConfigError: ``backend`` is unknown, ``cuml`` cannot run here, or a grid list is empty.
    """

    #: The backend has its own label (every record's and row's ``backend``).
    not_protocol = ("requested_backend", "resolved_backend")

    name = "rf"

    def __init__(self, backend: str = "auto", n_jobs: int = -1, n_estimators: Sequence[int] = N_ESTIMATORS,
                 max_depth: Sequence[int] = MAX_DEPTH, min_samples_split: Sequence[int] = MIN_SAMPLES_SPLIT,
                 min_samples_leaf: Sequence[int] = MIN_SAMPLES_LEAF,
                 max_features: Sequence[str | int | float] = MAX_FEATURES,
                 binary_metric: str = "auroc") -> None:
        super().__init__(binary_metric)
        self.requested_backend = backend
        self.n_jobs = n_jobs
        self.n_estimators = tuple(n_estimators)
        self.max_depth = tuple(max_depth)
        self.min_samples_split = tuple(min_samples_split)
        self.min_samples_leaf = tuple(min_samples_leaf)
        self.max_features = tuple(max_features)
        empty = [k for k in GRID_KEYS if not getattr(self, k)]
        if empty:
            raise ConfigError(f"rf regime: the grid needs at least one value for {', '.join(empty)}")
        self._backend = resolve_backend(backend)

    def family(self, ctx: JobContext) -> ProbeFamily:
        """The forest family with this regime's grid and resolved backend (the same for every task)."""
        return ForestFamily(self.n_estimators, self.max_depth, self.min_samples_split, self.min_samples_leaf,
                            self.max_features, backend=self._backend, n_jobs=self.n_jobs)

    def backend(self) -> str:
        """The resolved backend (``sklearn`` or ``cuml``), stored in every job record."""
        return self._backend

    def backend_for(self, kind: str) -> str:
        """``sklearn`` for multi-output regression whatever was resolved (cuML forests take one target)."""
        return forest_backend_for(kind, self._backend)

    def settings(self) -> dict[str, Any]:
        """Grid, requested and resolved backend; ``n_jobs`` (a speed setting) is left out."""
        out = {k: v for k, v in super().settings().items() if k != "n_jobs"}
        out["resolved_backend"] = self._backend
        return out

    def fit_and_score(self, ctx: JobContext, train_positions: np.ndarray) -> RepeatOutcome:
        """As for every probe, plus the library that really fitted (multi-output falls back to sklearn)."""
        outcome = super().fit_and_score(ctx, train_positions)
        outcome.details["forest_backend"] = forest_backend_for(ctx.task.kind, self._backend)
        return outcome
