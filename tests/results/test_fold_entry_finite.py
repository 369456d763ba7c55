"""An ``ok`` record with no finite value of its reported metric is malformed; NaN elsewhere is not.

Before, such a record made a :class:`FoldEntry` with ``value=None``: the job counted as done and the
summary silently dropped its fold.
"""

from __future__ import annotations

import math

import pytest

from ppgbench_pl.results.fold_entry import MalformedRecord, entry_or_id, fold_entry


def record(*metrics: dict[str, float | None]) -> dict:
    return {"job_id": "j", "model": "m", "task": "synthetic-stiffness", "regime": "linear", "seed": 42,
            "fold": 0, "metric": "balanced_accuracy", "status": "ok",
            "results": [{"metrics": dict(m)} for m in metrics]}


@pytest.mark.parametrize("metrics", [
    [{"balanced_accuracy": math.nan, "auroc": math.nan}],
    [{"balanced_accuracy": None}, {"balanced_accuracy": math.inf}],
    [{"auroc": 0.7}],  # only another metric: the summary's number is still missing
    [{}],
    [],  # no repeat at all
], ids=["all_nan", "null_and_inf", "reported_missing", "no_metrics", "no_repeats"])
def test_no_finite_reported_metric_is_malformed(metrics):
    with pytest.raises(MalformedRecord, match="no repeat has a finite value of its metric 'balanced_accuracy'"):
        fold_entry(record(*metrics))
    with pytest.raises(MalformedRecord):
        entry_or_id(record(*metrics))


def test_a_nan_secondary_metric_or_a_nan_repeat_still_makes_an_entry():
    entry = fold_entry(record({"balanced_accuracy": 0.6, "auroc": math.nan},  # AUROC undefined (one class)
                              {"balanced_accuracy": 0.8, "auroc": None}))
    assert entry is not None and entry.value == pytest.approx(0.7)


def test_a_record_that_is_not_ok_needs_no_metric():
    assert fold_entry({**record(), "status": "failed"}) is None
    assert entry_or_id({**record(), "status": "not_evaluable"}) == "j"
