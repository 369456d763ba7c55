import hashlib
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgbench_pl.data.splits import (
    GroupHoldoutSplit,
    InnerGroupSplit,
    OuterGroupSplit,
    chunk,
    dataset_seed,
    holdout_groups,
    inner_group_folds,
    outer_group_folds,
)
from ppgbench_pl.errors import ConfigError


def test_chunk_sizes_follow_the_published_rule():
    assert [len(c) for c in chunk(list(range(12)), 5)] == [3, 3, 2, 2, 2]
    assert [len(c) for c in chunk(list(range(5)), 5)] == [1, 1, 1, 1, 1]


def test_dataset_seed_is_sha256_prefix():
    assert dataset_seed(42, "ppgbp") == int(hashlib.sha256(b"42:ppgbp").hexdigest()[:16], 16)


def test_outer_folds_reproduce_the_published_assignment():
    groups = [f"S{i}" for i in range(1, 13)]
    # Written out independently of the implementation: string sort, Random(seed).shuffle, 5 chunks.
    names = sorted(groups)
    assert names[:4] == ["S1", "S10", "S11", "S12"]  # string order, not numeric
    random.Random(int(hashlib.sha256(b"43:dalia").hexdigest()[:16], 16)).shuffle(names)
    expected_tests = [names[0:3], names[3:6], names[6:8], names[8:10], names[10:12]]
    folds = outer_group_folds(groups, 43, "dalia")
    assert [test for _, test in folds] == expected_tests
    for train, test in folds:
        assert train == [g for g in names if g not in test]  # shuffled order kept


def test_outer_folds_depend_on_seed_and_dataset():
    groups = [f"S{i:02d}" for i in range(20)]
    a = outer_group_folds(groups, 42, "x")
    assert a != outer_group_folds(groups, 43, "x")
    assert a != outer_group_folds(groups, 42, "y")
    assert a == outer_group_folds(list(reversed(groups)), 42, "x")


def test_inner_and_holdout_follow_first_appearance_order():
    train = ["b", "b", "a", "c", "a", "d", "e"]
    unique = ["b", "a", "c", "d", "e"]
    shuffled = list(unique)
    random.Random(42).shuffle(shuffled)
    assert inner_group_folds(train, 42, 4) == chunk(shuffled, 4)
    shuffled = list(unique)
    random.Random(42 + 1009 * 2).shuffle(shuffled)
    fit, val = holdout_groups(train, 42, repeat=2)
    assert val == shuffled[:1] and fit == shuffled[1:]


def test_holdout_size_uses_python_round():
    groups = [f"g{i}" for i in range(10)]
    assert len(holdout_groups(groups, 1)[1]) == 2
    assert len(holdout_groups([f"g{i}" for i in range(12)], 1)[1]) == 2  # round(2.4)
    assert len(holdout_groups([f"g{i}" for i in range(3)], 1)[1]) == 1  # max(1, round(0.6))


def test_too_few_groups_is_a_config_error():
    with pytest.raises(ConfigError, match="at least 5"):
        outer_group_folds(["a", "b", "c", "d"], 42, "x")
    with pytest.raises(ConfigError):
        inner_group_folds(["a", "b", "c"], 42, 4)
    with pytest.raises(ConfigError):
        holdout_groups(["a"], 42)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=9, max_size=30),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_no_group_crosses_train_validation_test(sizes, seed):
    groups = np.concatenate([[f"G{i}"] * n for i, n in enumerate(sizes)])
    x = np.zeros((len(groups), 1))
    seen_test = []
    for train, test in OuterGroupSplit("prop", seed).split(x, None, groups):
        assert set(groups[train]).isdisjoint(groups[test])
        assert len(train) + len(test) == len(groups)
        seen_test.extend(set(groups[test]))
        for inner_train, inner_val in InnerGroupSplit(seed).split(x[train], None, groups[train]):
            assert set(groups[train][inner_train]).isdisjoint(groups[train][inner_val])
            assert len(inner_train) + len(inner_val) == len(train)
        for fit, val in GroupHoldoutSplit(seed).split(x[train], None, groups[train]):
            assert set(groups[train][fit]).isdisjoint(groups[train][val])
            assert set(groups[train][val]).isdisjoint(groups[test])
    assert sorted(seen_test) == sorted(set(groups))  # every group is tested exactly once


def test_outer_split_keeps_unlabelled_groups_in_place():
    all_groups = [f"S{i:02d}" for i in range(10)]
    labelled = np.array([g for g in all_groups if g != "S03" for _ in range(2)])
    splitter = OuterGroupSplit("d", 42, all_groups=all_groups)
    expected = outer_group_folds(all_groups, 42, "d")
    for (_, test), (_, test_groups) in zip(splitter.split(labelled, None, labelled), expected, strict=True):
        assert set(labelled[test]) == set(test_groups) - {"S03"}
