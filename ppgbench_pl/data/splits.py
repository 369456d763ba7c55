"""Subject-disjoint scikit-learn splitters that reproduce the published group assignment (PROTOCOL.md 3)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppgbench_pl.errors import ConfigError


@dataclass(frozen=True)
class OuterSplit:
    """The job's outer fold as positions into the task view (``train`` in shuffled group order)."""

    train: np.ndarray
    test: np.ndarray


def chunk(items: Sequence[Any], n_chunks: int) -> list[list[Any]]:
    """Consecutive chunks; chunk i has floor(n/k) items plus one more when i < n mod k."""
    base, extra = divmod(len(items), n_chunks)  # chunk i starts after i chunks of base, min(i, extra) of them + 1
    return [list(items[i * base + min(i, extra) : (i + 1) * base + min(i + 1, extra)]) for i in range(n_chunks)]


def dataset_seed(seed: int, dataset: str) -> int:
    """Integer of the first 16 hex digits of SHA-256 of ``"<seed>:<dataset>"``."""
    return int(hashlib.sha256(f"{seed}:{dataset}".encode()).hexdigest()[:16], 16)


def outer_group_folds(groups: Sequence[str], seed: int, dataset: str,
                      n_folds: int = 5) -> list[tuple[list[str], list[str]]]:
    """(train groups, test groups) per outer fold; train groups stay in shuffled order."""
    names = sorted({str(g) for g in groups})
    if len(names) < n_folds:
        raise ConfigError(f"dataset '{dataset}' has {len(names)} groups; subject-disjoint CV needs at least {n_folds}")
    random.Random(dataset_seed(seed, dataset)).shuffle(names)
    chunks = chunk(names, n_folds)
    return [([g for j, c in enumerate(chunks) if j != i for g in c], chunks[i]) for i in range(n_folds)]


def first_appearance(groups: Sequence[Any]) -> list[Any]:
    """Unique groups in order of first appearance."""
    return list(dict.fromkeys(groups))


def inner_group_folds(train_groups: Sequence[Any], seed: int, n_folds: int = 4) -> list[list[Any]]:
    """Validation groups of each inner fold: first-appearance order, shuffled with ``Random(seed)``."""
    if n_folds < 2:
        raise ConfigError(f"inner folds must be at least 2, got {n_folds}")
    unique = first_appearance(train_groups)
    if len(unique) < n_folds:
        raise ConfigError(f"{len(unique)} training groups cannot make {n_folds} inner folds")
    random.Random(seed).shuffle(unique)
    return chunk(unique, n_folds)


def holdout_groups(train_groups: Sequence[Any], seed: int, repeat: int = 0,
                   fraction: float = 0.2) -> tuple[list[Any], list[Any]]:
    """(fit groups, validation groups): the first max(1, round(0.2 n)) shuffled groups validate."""
    unique = first_appearance(train_groups)
    if len(unique) < 2:
        raise ConfigError(f"a validation holdout needs at least 2 training groups, got {len(unique)}")
    random.Random(seed + 1009 * repeat).shuffle(unique)
    n_val = max(1, round(fraction * len(unique)))
    return unique[n_val:], unique[:n_val]


def _rows_by_group(groups: np.ndarray) -> dict[str, np.ndarray]:
    """Each group's row positions, ascending (every group at once, in one sort)."""
    order = np.argsort(groups, kind="stable").astype(np.int64)
    names, starts = np.unique(groups[order], return_index=True)
    return dict(zip(names.tolist(), np.split(order, starts[1:]), strict=True))


class _GroupSplitter:
    """A scikit-learn splitter over groups; subclasses name the validation groups of each split."""

    n_splits = 1

    def get_n_splits(self, X: Any = None, y: Any = None, groups: Any = None) -> int:  # noqa: N803
        """Number of splits."""
        return self.n_splits

    def validation_groups(self, groups: list[Any]) -> list[list[Any]]:
        """The validation groups of each split."""
        raise NotImplementedError

    def split(self, X: Any, y: Any = None, groups: Any = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # noqa: N803
        """Yield (train indices, validation indices) per split."""
        groups = np.asarray(groups)
        for val in self.validation_groups(list(groups)):
            mask = np.isin(groups, val)
            yield np.flatnonzero(~mask), np.flatnonzero(mask)


class OuterGroupSplit(_GroupSplitter):
    """Outer folds of one seed for one dataset (scikit-learn splitter).

    ``all_groups``: every group of the dataset, those without a valid label included (they keep their place
    in the published split); default: the groups passed to ``split``.
    """

    def __init__(self, dataset: str, seed: int, n_splits: int = 5, all_groups: Sequence[str] | None = None) -> None:
        self.dataset, self.seed, self.n_splits = dataset, seed, n_splits
        self.all_groups = list(all_groups) if all_groups is not None else None

    def split(self, X: Any, y: Any = None, groups: Any = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # noqa: N803
        """Yield (train indices, test indices) per outer fold; train follows the shuffled group order, as published."""
        groups = np.asarray(groups).astype(str)
        names = self.all_groups if self.all_groups is not None else list(groups)
        rows = _rows_by_group(groups)
        none = np.empty(0, dtype=np.int64)
        for train, test in outer_group_folds(names, self.seed, self.dataset, self.n_splits):
            test_rows = np.sort(np.concatenate([none, *(rows.get(g, none) for g in test)]))
            yield np.concatenate([rows.get(g, none) for g in train]).astype(np.int64), test_rows


class InnerGroupSplit(_GroupSplitter):
    """Inner group folds on an outer-training part (scikit-learn splitter)."""

    def __init__(self, seed: int, n_splits: int = 4) -> None:
        self.seed, self.n_splits = seed, n_splits

    def validation_groups(self, groups: list[Any]) -> list[list[Any]]:
        """Each inner fold's validation groups."""
        return inner_group_folds(groups, self.seed, self.n_splits)


class GroupHoldoutSplit(_GroupSplitter):
    """The single 20 % group holdout used by the neural regimes (scikit-learn splitter)."""

    def __init__(self, seed: int, repeat: int = 0, fraction: float = 0.2) -> None:
        self.seed, self.repeat, self.fraction = seed, repeat, fraction

    def validation_groups(self, groups: list[Any]) -> list[list[Any]]:
        """The one holdout's validation groups."""
        return [holdout_groups(groups, self.seed, self.repeat, self.fraction)[1]]
