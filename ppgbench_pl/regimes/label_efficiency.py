"""Label efficiency: the linear probe on a seeded fraction of the outer-training subjects (``linear_frac<pct>``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ppgbench_pl.data.splits import first_appearance
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import JobContext, RepeatOutcome
from ppgbench_pl.regimes.linear import LinearRegime


def regime_name(fraction: float) -> str:
    """``linear_frac<percent>`` with ``%g`` (0.01 -> ``linear_frac1``; float noise stays out of names)."""
    return f"linear_frac{fraction * 100:g}"


def sample_groups(groups: list[Any], fraction: float, min_groups: int, seed: int) -> list[Any]:
    """``ceil(fraction x n)`` (>= ``min_groups``, else ``ConfigError``) of ``groups`` in order, seeded."""
    n = len(groups)
    if n < min_groups:
        raise ConfigError(f"label efficiency needs at least {min_groups} training subjects, got {n}")
    k = min(n, max(min_groups, math.ceil(round(fraction * n, 9))))
    rng = np.random.default_rng([seed, round(fraction * 1_000_000)])
    chosen = set(rng.choice(n, size=k, replace=False).tolist())
    return [g for i, g in enumerate(groups) if i in chosen]


class LabelEfficiencyRegime(LinearRegime):
    """The linear regime on a seeded fraction of the outer-training subjects (groups).

    Args:
        fraction: Share of the outer-training subjects to train on, in (0, 1].
        min_groups: Fewest subjects used whatever the fraction (default: the number of inner folds,
            so the inner group CV can still be built).
        binary_metric: Selection metric for binary tasks (``auroc`` as published).

    Raises:
        ConfigError: ``fraction`` is outside (0, 1] or ``min_groups`` is below 1.
    """

    name = "linear_frac"
    not_protocol = ("fraction",)  # in the regime's name (linear_frac10)

    def __init__(self, fraction: float = 1.0, min_groups: int | None = None,
                 binary_metric: str = "auroc") -> None:
        super().__init__(binary_metric)
        if not 0.0 < fraction <= 1.0:
            raise ConfigError(f"label-efficiency fraction must be in (0, 1], got {fraction}")
        if min_groups is not None and min_groups < 1:
            raise ConfigError(f"min_groups must be at least 1, got {min_groups}")
        self.fraction, self.min_groups = float(fraction), min_groups
        self.name = regime_name(self.fraction)  # type: ignore[misc]  # per-instance name, one per fraction

    @property
    def state_key(self) -> str:
        """Distinct per fraction, since one trainer holds several instances of this callback."""
        return self._generate_state_key(fraction=self.fraction)

    def settings(self) -> dict[str, Any]:
        """Fraction, minimum and selection metric (the name is derived from the fraction)."""
        return {k: v for k, v in super().settings().items() if k != "name"}

    def train_positions(self, ctx: JobContext) -> tuple[np.ndarray, list[Any], int]:
        """(positions of the sampled subjects' windows, those subjects, outer-training subject count)."""
        view = ctx.view
        train, _ = ctx.outer()
        groups = first_appearance(view.groups[train].tolist())
        minimum = ctx.n_inner_folds if self.min_groups is None else self.min_groups
        chosen = sample_groups(groups, self.fraction, minimum, ctx.seed)
        keep = np.isin(view.groups[train], np.asarray(chosen, dtype=view.groups.dtype))
        return train[keep], chosen, len(groups)

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        """One repeat on the sampled subjects; the subject counts go into the record."""
        positions, chosen, n_available = self.train_positions(ctx)
        outcome = self.fit_and_score(ctx, positions)
        outcome.details.update(fraction=self.fraction, n_train_subjects=len(chosen),
                               n_outer_train_subjects=n_available, train_subjects=[str(g) for g in chosen])
        return [outcome]
