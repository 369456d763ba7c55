import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

from ppgbench_pl.metrics.aggregation import aggregate, candidates, first_per_group
from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.metrics.scores import (
    NotEvaluableError,
    Predictions,
    auroc,
    balanced_accuracy,
    fold_metrics,
    selection_score,
)
from ppgbench_pl.probes.constant import constant_predictions


def test_topk_mean_takes_the_more_extreme_tail():
    groups = np.array(["a"] * 10 + ["b"] * 10)
    p = np.concatenate([np.linspace(0.0, 0.45, 10), np.r_[np.full(9, 0.4), 0.99]])
    names, values = aggregate(groups, np.c_[1 - p, p], "topk_mean")
    assert list(names) == ["a", "b"]
    # subject a: k = 1; low of column 1 is 0.0, high is 0.45 -> 1-0.45 > 0.0 so low (0.0) is used
    assert values[0, 1] == pytest.approx(0.0)
    # subject b: high 0.99, 1-0.99 <= low 0.4 -> high
    assert values[1, 1] == pytest.approx(0.99)
    _, med = aggregate(groups, np.c_[1 - p, p], "median")
    assert med[1, 1] == pytest.approx(0.4)


def test_topk_needs_probabilities_and_candidates_by_kind():
    with pytest.raises(ValueError):
        aggregate(np.array(["a", "a"]), np.array([[2.0], [3.0]]), "topk_mean")
    assert candidates("regression") == ("mean",)
    assert candidates("classification") == ("mean", "median", "topk_mean")


def test_subject_level_evaluation_aggregates_windows():
    groups = np.array(["s1", "s1", "s1", "s2", "s2"])
    y = np.array([1, 1, 1, 0, 0])
    proba = np.array([[0.4, 0.6], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1], [0.2, 0.8]])
    pred = Predictions("classification", proba, np.array([0, 1]))
    window = evaluate("classification", "window", y, groups, pred, None)
    subject = evaluate("classification", "subject", y, groups, pred, "mean")
    assert window["accuracy"] == pytest.approx(3 / 5)
    assert subject["accuracy"] == 1.0 and subject["n_subjects"] == 2 and subject["aggregation"] == "mean"


def test_test_labels_of_one_class_are_not_evaluable():
    pred = Predictions("classification", np.array([[0.2, 0.8], [0.7, 0.3]]), np.array([0, 1]))
    with pytest.raises(NotEvaluableError, match="balanced accuracy is not evaluable: every test label is class 1"):
        fold_metrics("classification", np.array([1, 1]), pred)  # used to be balanced accuracy 0.5 / 1.0
    with pytest.raises(NotEvaluableError):
        evaluate("classification", "subject", np.array([1, 1]), np.array(["a", "b"]), pred, "mean")
    assert np.isnan(selection_score("classification", np.array([1, 1]), pred))  # inner folds: left out
    y = np.array([[1, 0, 0, 0, 0, 0.0], [2, 0, 0, 0, 0, 0.0]])
    with pytest.raises(NotEvaluableError, match="argmax balanced accuracy"):
        fold_metrics("regression_cls", y, Predictions("regression_cls", y))


def test_binary_probability_of_one_half_is_the_positive_class():
    classes = np.array([3, 7])
    pred = Predictions("classification", np.array([[0.5, 0.5], [0.5000001, 0.4999999], [0.2, 0.8]]), classes)
    assert pred.labels.tolist() == [7, 3, 7]
    multi = Predictions("classification", np.array([[0.4, 0.4, 0.2]]), np.array([0, 1, 2]))
    assert multi.labels.tolist() == [0]  # multiclass: first maximum, as argmax


def test_fast_selection_scores_equal_sklearn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    scores = np.round(rng.random(200), 1)  # many ties
    assert auroc(y == 1, scores) == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-12)
    y3, p3 = rng.integers(0, 4, 300), rng.integers(0, 5, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert balanced_accuracy(y3, p3) == pytest.approx(skm.balanced_accuracy_score(y3, p3), abs=1e-12)


def test_selection_metrics_follow_the_protocol():
    pred = Predictions("classification", np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]]), np.array([0, 1]))
    y = np.array([0, 1, 1])
    assert selection_score("classification", y, pred, "auroc") == 1.0
    assert selection_score("classification", y, pred, "balanced_accuracy") == pytest.approx(0.75)
    assert selection_score("regression", np.array([1.0, 2.0]), Predictions("regression", np.array([2.0, 2.0]))) == -0.5


def test_regression_cls_metrics_use_first_argmax():
    y = np.array([[1, 5, 5, 0, 0, 0], [9, 0, 0, 0, 0, 0.0]])
    p = np.array([[0, 6, 1, 0, 0, 0], [0, 0, 8, 0, 0, 0.0]])
    out = fold_metrics("regression_cls", y, Predictions("regression_cls", p))
    assert out["argmax_accuracy"] == 0.5 and out["argmax_true_tie_rate"] == 0.5
    assert len(out["mae_per_target"]) == 6


def test_constant_baseline_counts_subjects_not_windows():
    groups = np.array(["a"] * 5 + ["b", "c"])
    y = np.array([1] * 5 + [0, 0])
    window_level = constant_predictions("classification", "window", y, groups, 2)
    subject_level = constant_predictions("classification", "subject", y, groups, 2)
    assert window_level.labels.tolist() == [1, 1] and subject_level.labels.tolist() == [0, 0]
    reg = constant_predictions("regression", "subject", np.array([1.0] * 5 + [4.0, 4.0]), groups, 3)
    assert reg.values.tolist() == [3.0, 3.0, 3.0]
    assert first_per_group(groups, y).tolist() == [1, 0, 0]
