"""Search seeds (#19): search seed k moves every stream to r + stride * k on the same split; k = 0 is published."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from ppgbench_pl.errors import ConfigError

#: Offset between the random streams of two search seeds (a prime far above any repeat offset, 1009 * k).
SEARCH_SEED_STRIDE = 100_003
#: The published single search.
PUBLISHED_SEARCH_SEEDS = (0,)


def check_search_seeds(value: Any) -> list[int]:
    """The search seeds, sorted: distinct whole numbers >= 0 including 0 (else ``ConfigError``)."""
    if value is None:
        return list(PUBLISHED_SEARCH_SEEDS)
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(f"search_seeds={value!r}: expected a list of whole numbers such as [0, 1, 2]")
    items = list(value)
    bad = [v for v in items if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if bad or not items:
        raise ConfigError(f"search_seeds={value!r}: every search seed must be a whole number >= 0, "
                          "e.g. [0, 1, 2]")
    if len(set(items)) != len(items):
        raise ConfigError(f"search_seeds={value!r}: a search seed is listed twice")
    if 0 not in items:
        raise ConfigError(f"search_seeds={value!r}: must include 0, the published search that the tables "
                          "report (the others measure the search noise around it)")
    return sorted(items)


def search_rng_seed(r: int, search_seed: int) -> int:
    """The seed of a search's random streams: r for the published search 0, r + stride * k otherwise."""
    return r + SEARCH_SEED_STRIDE * search_seed


def seed_search(first: Any, search_seed: int, make_factory: Callable[..., Any]) -> Any:
    """Search seed ``search_seed`` of a repeat's first search: the same split, new streams (rows shared)."""
    r = search_rng_seed(first.seed, search_seed)
    fork = getattr(first.factory, "for_search", None)
    factory = fork(r) if callable(fork) else make_factory(first.ctx, first.split, first.targets, r)
    return replace(first, seed=r, factory=factory, search_seed=search_seed)


def searches_per_job(regime: Any) -> int:
    """How many searches each repeat of a job of ``regime`` runs (1 for every regime but a multi-seed search)."""
    return len(getattr(regime, "search_seeds", None) or PUBLISHED_SEARCH_SEEDS)


def describe_search_seeds(regimes: Sequence[Any], jobs_per_regime: dict[str, int]) -> str | None:
    """The dry run's line on search seeds (None when every regime runs the published single search)."""
    parts = []
    for regime in regimes:
        k = searches_per_job(regime)
        if k > 1:
            n = jobs_per_regime.get(regime.name, 0)
            parts.append(f"{regime.name} {list(regime.search_seeds)}: {k} searches per job and repeat, "
                         f"{n} jobs cost {k}x a published job each ({n * k} job-searches)")
    if not parts:
        return None
    return "search seeds (search-noise sensitivity, not the published single search): " + "; ".join(parts)
