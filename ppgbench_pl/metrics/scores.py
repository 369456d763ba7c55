"""Per-fold metrics (PROTOCOL.md 7.1) and the selection metrics used inside searches (section 2).

A metric that cannot be computed is ``None`` with a ``<metric>_error``; one test class: :class:`NotEvaluableError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

from ppgbench_pl.errors import DataError


class NotEvaluableError(DataError):
    """The fold's labels make the reported metric meaningless (one class only)."""


@dataclass
class Predictions:
    """Model output on some examples: regression values, or class probabilities with their classes."""

    kind: str
    values: np.ndarray
    classes: np.ndarray | None = None
    subject_level: bool = False  # scores aggregated per subject: the class is their argmax (PROTOCOL.md 6)

    @property
    def labels(self) -> np.ndarray:
        """Predicted class labels: binary windows p >= 0.5 (PROTOCOL.md 4.3), else argmax (first maximum; 6)."""
        assert self.classes is not None
        if self.values.ndim == 2 and self.values.shape[1] == 2 and not self.subject_level:
            return self.classes[(self.values[:, 1] >= self.values[:, 0]).astype(np.int64)]
        return self.classes[np.argmax(self.values, axis=1)]


def _safe(name: str, fn: Any, out: dict[str, Any]) -> None:
    try:
        out[name] = float(fn())
    except ValueError as exc:
        out[name] = None
        out[f"{name}_error"] = str(exc).splitlines()[0]


def regression_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """MAE, MSE, RMSE and R2 (averaged over outputs for multi-output targets)."""
    from sklearn import metrics as skm

    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    mse = float(np.mean((y_true - y_pred) ** 2))
    out: dict[str, Any] = {"mae": float(np.mean(np.abs(y_true - y_pred))), "mse": mse, "rmse": float(np.sqrt(mse))}
    _safe("r2", lambda: skm.r2_score(y_true, y_pred) if len(y_true) > 1 else np.nan, out)
    return out


def classification_metrics(y_true: np.ndarray, pred: Predictions) -> dict[str, Any]:
    """Accuracy, balanced accuracy, macro F1; AUROC/AUPRC (binary) or one-vs-rest AUROC (multiclass)."""
    from sklearn import metrics as skm

    assert pred.classes is not None
    y_true = np.asarray(y_true)
    _require_two_classes(y_true, "balanced accuracy")
    labels = pred.labels
    out: dict[str, Any] = {
        "accuracy": float(skm.accuracy_score(y_true, labels)),
        "balanced_accuracy": float(skm.balanced_accuracy_score(y_true, labels)),
        "f1_macro": float(skm.f1_score(y_true, labels, average="macro", zero_division=0)),
    }
    if len(pred.classes) == 2:
        positive = pred.values[:, 1]
        for name, fn in (("auroc", skm.roc_auc_score), ("auprc", skm.average_precision_score)):
            _safe(name, lambda fn=fn: fn(y_true == pred.classes[1], positive), out)
    elif len(pred.classes) > 2:
        _safe("auroc_ovr", lambda: _auroc_ovr(y_true, pred), out)
    return out


def _auroc_ovr(y_true: np.ndarray, pred: Predictions) -> float:
    """Macro one-vs-rest AUROC over the classes present in ``y_true``."""
    from sklearn import metrics as skm

    assert pred.classes is not None
    if not np.isin(y_true, pred.classes).all():  # (one class only was refused above)
        raise ValueError("test classes not all known to the model")
    scores = []
    for k, cls in enumerate(pred.classes):
        positives = y_true == cls
        if positives.any() and not positives.all():
            scores.append(skm.roc_auc_score(positives, pred.values[:, k]))
    if not scores:
        raise ValueError("no class with both positives and negatives")
    return float(np.mean(scores))


def regression_cls_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """Multi-output regression metrics, per target, plus the argmax classification and its ties (ECSMP, 7.1)."""
    from sklearn import metrics as skm

    out = regression_metrics(y_true, y_pred)
    true_cls, pred_cls = np.argmax(y_true, axis=1), np.argmax(y_pred, axis=1)
    _require_two_classes(true_cls, "argmax balanced accuracy")  # so R2 has at least two examples below
    out["mae_per_target"] = np.mean(np.abs(y_true - y_pred), axis=0).tolist()
    out["mse_per_target"] = np.mean((y_true - y_pred) ** 2, axis=0).tolist()
    out["r2_per_target"] = skm.r2_score(y_true, y_pred, multioutput="raw_values").tolist()
    out["argmax_accuracy"] = float(skm.accuracy_score(true_cls, pred_cls))
    out["argmax_balanced_accuracy"] = float(skm.balanced_accuracy_score(true_cls, pred_cls))
    out["argmax_f1_macro"] = float(skm.f1_score(true_cls, pred_cls, average="macro", zero_division=0))
    for side, scores in (("true", np.asarray(y_true)), ("pred", np.asarray(y_pred))):
        tied = np.asarray((scores == scores.max(axis=1, keepdims=True)).sum(axis=1) > 1)  # argmax takes the first
        out[f"argmax_{side}_tie_rate"] = float(np.mean(tied))
        out[f"argmax_{side}_tie_count"] = int(tied.sum())
    return out


def _require_two_classes(y_true: np.ndarray, metric: str) -> None:
    """Refuse to score a fold whose true labels hold one class (the metric would be 1.0 or undefined)."""
    present = np.unique(y_true)
    if len(present) < 2:
        what = f"class {present[0]}" if len(present) else "empty"
        raise NotEvaluableError(f"{metric} is not evaluable: every test label is {what} "
                                f"({len(y_true)} examples); AUROC is undefined too")


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean recall over the classes present in ``y_true`` (scikit-learn's value, without its overhead)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    present, inverse = np.unique(y_true, return_inverse=True)
    hits = np.bincount(inverse, weights=(y_true == y_pred).astype(np.float64), minlength=len(present))
    return float(np.mean(hits / np.bincount(inverse, minlength=len(present))))


def auroc(positive: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank-sum (ties count one half), equal to scikit-learn's; NaN with one class."""
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def fold_metrics(kind: str, y_true: np.ndarray, pred: Predictions) -> dict[str, Any]:
    """All stored metrics of one evaluation, by task kind."""
    if kind == "regression":
        return regression_metrics(y_true, pred.values)
    if kind == "regression_cls":
        return regression_cls_metrics(y_true, pred.values)
    return classification_metrics(y_true, pred)


def selection_score(kind: str, y_true: np.ndarray, pred: Predictions, binary_metric: str = "auroc") -> float:
    """The score a search maximises: -MAE, binary AUROC, else balanced accuracy; NaN if undefined."""
    if kind in ("regression", "regression_cls"):
        return -float(np.mean(np.abs(np.asarray(y_true, float) - np.asarray(pred.values, float))))
    assert pred.classes is not None
    if len(pred.classes) == 2 and binary_metric == "auroc":
        return auroc(np.asarray(y_true) == pred.classes[1], pred.values[:, 1])
    return balanced_accuracy(y_true, pred.labels)
