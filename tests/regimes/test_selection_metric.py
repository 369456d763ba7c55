"""The torchmetrics selection metric the search reads equals the protocol's selection score."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppgbench_pl.metrics.aggregation import candidates
from ppgbench_pl.regimes.selection import SelectionMetric, SelectionScorer, Targets

RNG = np.random.default_rng(0)
GROUPS = np.repeat([f"S{i}" for i in range(12)], 5)


def _scorer(loss: str, binary_metric: str = "auroc", aggregations: tuple[str, ...] = ()) -> tuple[SelectionScorer, int]:
    n = len(GROUPS)
    if loss == "mse":
        targets, y, width = Targets("regression", None, "mse", 1), RNG.normal(70, 10, n), 1
    elif loss == "bce":
        targets, y, width = Targets("classification", np.array([0, 1]), "bce", 1), RNG.integers(0, 2, n), 1
    else:
        targets, y, width = Targets("classification", np.array([1, 2, 5]), "ce", 3), RNG.choice([1, 2, 5], n), 3
    return SelectionScorer(targets, y, GROUPS, binary_metric, aggregations), width


@pytest.mark.parametrize("loss,binary_metric,aggregations", [
    ("mse", "auroc", ()), ("bce", "auroc", ()), ("bce", "balanced_accuracy", ()), ("ce", "auroc", ()),
    ("bce", "auroc", tuple(candidates("classification"))), ("ce", "auroc", ("mean", "median")), ("mse", "auroc", ("mean",)),
])
def test_the_metric_equals_the_scorer_chunk_by_chunk(loss, binary_metric, aggregations):
    scorer, width = _scorer(loss, binary_metric, aggregations)
    for agg in range(max(len(aggregations), 1)):
        outputs = RNG.normal(0, 2, (len(GROUPS), width)).astype(np.float32)
        metric = SelectionMetric(scorer, agg if aggregations else None)
        for chunk in np.array_split(outputs, 4):  # the validation loop feeds it chunk by chunk
            metric.update(torch.as_tensor(chunk))
        expected = scorer(outputs.astype(np.float64), agg if aggregations else None)
        assert float(metric.compute()) == pytest.approx(expected, rel=1e-9, abs=1e-12)
        metric.reset()
        metric.update(torch.as_tensor(outputs))
        assert float(metric.compute()) == pytest.approx(expected, rel=1e-9, abs=1e-12)  # reset starts afresh


def test_non_finite_outputs_or_one_class_give_nan():
    scorer, _ = _scorer("mse")
    metric = SelectionMetric(scorer)
    metric.update(torch.full((len(GROUPS), 1), float("nan")))
    assert np.isnan(float(metric.compute()))
    one_class = SelectionScorer(Targets("classification", np.array([0, 1]), "bce", 1), np.ones(len(GROUPS)), GROUPS,
                                "auroc")
    metric = SelectionMetric(one_class)
    metric.update(torch.zeros(len(GROUPS), 1))
    assert np.isnan(float(metric.compute())) and np.isnan(one_class(np.zeros((len(GROUPS), 1))))
