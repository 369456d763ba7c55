"""The regression-based classification outputs PROTOCOL.md 7.1 lists (issue 31, item 7): R2 per target and
the argmax tie rates and counts of the true and the predicted score vectors, beside the metrics as before."""

from __future__ import annotations

import numpy as np
import pytest

from ppgbench_pl.metrics.scores import Predictions, fold_metrics

#: Keys written before these outputs existed; their values must not change.
EARLIER = ("mae", "mse", "rmse", "r2", "mae_per_target", "mse_per_target", "argmax_accuracy",
           "argmax_balanced_accuracy", "argmax_f1_macro", "argmax_true_tie_rate")
ADDED = ("r2_per_target", "argmax_pred_tie_rate", "argmax_true_tie_count", "argmax_pred_tie_count")

Y = np.array([[1.0, 5.0, 5.0], [9.0, 0.0, 0.0], [2.0, 2.0, 1.0], [0.0, 1.0, 3.0], [4.0, 1.0, 0.0]])
P = np.array([[0.0, 6.0, 1.0], [3.0, 3.0, 0.5], [2.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.5, 1.0, 0.0]])


def test_every_protocol_output_is_written() -> None:
    out = fold_metrics("regression_cls", Y, Predictions("regression_cls", P))
    assert set(EARLIER) | set(ADDED) <= set(out)
    assert set(out) - set(EARLIER) - set(ADDED) == set()


def test_tie_rates_and_counts() -> None:
    """True rows 0 and 2 tie at their maximum (2 of 5); predicted rows 1 and 3 do (the all-equal row too)."""
    out = fold_metrics("regression_cls", Y, Predictions("regression_cls", P))
    assert (out["argmax_true_tie_count"], out["argmax_true_tie_rate"]) == (2, pytest.approx(0.4))
    assert (out["argmax_pred_tie_count"], out["argmax_pred_tie_rate"]) == (2, pytest.approx(0.4))
    assert isinstance(out["argmax_true_tie_count"], int) and isinstance(out["argmax_pred_tie_count"], int)
    no_ties = fold_metrics("regression_cls", Y[[1, 3, 4]],
                           Predictions("regression_cls", np.array([[3.0, 1, 0], [0, 1, 2], [2, 0, 1]])))
    assert (no_ties["argmax_true_tie_count"], no_ties["argmax_pred_tie_count"]) == (0, 0)


def test_r2_per_target_by_hand() -> None:
    out = fold_metrics("regression_cls", Y, Predictions("regression_cls", P))
    by_hand = 1 - ((Y - P) ** 2).sum(axis=0) / ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
    assert out["r2_per_target"] == pytest.approx(by_hand.tolist(), rel=1e-12)
    assert out["r2"] == pytest.approx(float(np.mean(by_hand)), rel=1e-12)  # the reported mean over targets


def test_earlier_metrics_keep_their_values() -> None:
    out = fold_metrics("regression_cls", Y, Predictions("regression_cls", P))
    assert out["mae"] == pytest.approx(np.abs(Y - P).mean()) and out["mse"] == pytest.approx(((Y - P) ** 2).mean())
    assert out["mae_per_target"] == pytest.approx(np.abs(Y - P).mean(axis=0).tolist())
    true_cls, pred_cls = Y.argmax(axis=1), P.argmax(axis=1)  # first index of a tie: [1, 0, 0, 2, 0] / [1, 0, 0, 0, 0]
    assert out["argmax_accuracy"] == pytest.approx(np.mean(true_cls == pred_cls))
    assert out["argmax_true_tie_rate"] == pytest.approx(0.4)


def test_a_regimes_outcome_carries_them() -> None:
    """The linear probe on the ECSMP emotion task: the repeat's metrics (what a job record stores under
    ``results[].metrics``) hold the new outputs, computed on its own test predictions."""
    from ppgbench_pl.data.registry import get_task
    from ppgbench_pl.data.splits import OuterSplit
    from ppgbench_pl.data.task_data import TaskView
    from ppgbench_pl.regimes.linear import LinearRegime
    from tests.regimes.neural_helpers import view_context

    rng = np.random.default_rng(0)
    task = get_task("ecsmp-emotion-reg-cls")
    groups = np.repeat([f"S{i:02d}" for i in range(10)], 8)
    x = rng.normal(size=(len(groups), 5))
    y = (x @ rng.normal(size=(5, 6)) + rng.normal(0, 0.5, (len(groups), 6))).round()  # rounded: ties occur
    test = np.isin(groups, ["S00", "S01"])
    view = TaskView(task, np.arange(len(groups)), y, groups, sorted(set(groups)))
    ctx = view_context("m1__emotion", view, OuterSplit(np.flatnonzero(~test), np.flatnonzero(test)), x)
    (outcome,) = LinearRegime().run(ctx)
    metrics, truth = outcome.metrics, y[test]
    assert set(ADDED) <= set(metrics) and len(metrics["r2_per_target"]) == 6
    ties = int(((truth == truth.max(axis=1, keepdims=True)).sum(axis=1) > 1).sum())
    assert metrics["argmax_true_tie_count"] == ties and metrics["argmax_true_tie_rate"] == pytest.approx(ties / 16)


def test_a_regression_cls_baseline_fits_the_record_schema() -> None:
    """The constant baseline of the task (a record's ``baseline``) holds per-target lists; the record schema
    allows them (it allowed numbers and strings only, so ECSMP emotion records did not validate)."""

    import jsonschema

    from ppgbench_pl.atomic_io import json_safe
    from ppgbench_pl.probes.constant import constant_predictions
    from ppgbench_pl.results.schemas import load

    schema = load("results.schema.json")
    groups = np.array(["a", "b", "c", "d", "e"])
    baseline = fold_metrics("regression_cls", Y, constant_predictions("regression_cls", "window", Y, groups, len(Y)))
    assert isinstance(baseline["r2_per_target"], list)
    jsonschema.validate(json_safe(baseline), schema["properties"]["baseline"])
