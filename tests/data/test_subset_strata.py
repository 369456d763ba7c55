"""The smoke budget's subjects are stratified on the tasks' labels (data/subset.py)."""

from __future__ import annotations

import numpy as np

from ppgbench_pl.data.subset import stratified_subjects


def test_stratified_choice_keeps_the_spread_and_the_classes() -> None:
    groups = [f"S{i:02d}" for i in range(30)]
    age = np.linspace(20, 80, 30)  # by name, the hash order kept a cluster of ages
    sex = np.array([i % 2 for i in range(30)], dtype=float)
    profiles = np.column_stack([age, sex, 1 - sex])
    kept = stratified_subjects(groups, 10, profiles)
    assert len(kept) == 10 and kept == sorted(kept)  # listed in the tree's order
    rows = [groups.index(g) for g in kept]
    assert abs(age[rows].mean() - age.mean()) < 3 and abs(age[rows].std() - age.std()) < 4
    assert sex[rows].sum() == 5  # both classes, balanced as in the whole
    assert stratified_subjects(groups, 10, profiles) == kept  # a pure function: every worker reads the same part
    by_name = stratified_subjects(groups, 10, None)
    assert by_name != kept and len(by_name) == 10


def test_missing_labels_and_no_cap() -> None:
    groups = ["a", "b", "c"]
    assert stratified_subjects(groups, None, np.zeros((3, 1))) == groups
    assert stratified_subjects(groups, 5, np.zeros((3, 1))) == groups
    profiles = np.array([[np.nan], [1.0], [3.0]])
    assert len(stratified_subjects(groups, 2, profiles)) == 2
    assert stratified_subjects(groups, 2, np.full((3, 1), np.nan)) == stratified_subjects(groups, 2, None)
