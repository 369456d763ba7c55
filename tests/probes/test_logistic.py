"""The batched logistic solver replays scikit-learn's lbfgs: same iterations, same coefficients, same C."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.probes.families import LogisticFamily
from ppgbench_pl.probes.linear import LOGISTIC_CS
from ppgbench_pl.probes.logistic import LogisticPath
from ppgbench_pl.probes.search import GroupGridSearch

#: Replayed coefficients agree with scikit-learn's to this (absolute; they are O(0.1-1)): only the order
#: of floating-point sums differs between the two.
COEF_ATOL = 1e-8


def _data(seed, n_groups=12, per=10, d=15, n_classes=3):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"g{i:02d}" for i in range(n_groups)], per)
    x = rng.normal(size=(len(groups), d)) + rng.normal(size=(n_groups, d)).repeat(per, axis=0)
    y = x[:, :5] @ rng.normal(size=5) + rng.normal(0, 3, len(groups))
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return x, labels, groups


def _sklearn_fit(x, y, c, **kwargs):
    """(coef [d+1, K-or-1] as ours stores it, n_iter) of scikit-learn's pipeline at its defaults."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter runs warn about convergence
        model = LogisticRegression(C=c, max_iter=kwargs.pop("max_iter", 1000), **kwargs)
        model.fit(StandardScaler().fit_transform(x), y)
    return np.c_[model.coef_, model.intercept_].T, int(model.n_iter_[0])


def _ours(path, g, part, classes_seen, all_classes):
    """Our solution in scikit-learn's layout: the free columns (binary: the one logit)."""
    theta = path.solutions_[g][part].numpy()
    cols = np.searchsorted(all_classes, classes_seen)
    return theta[:, cols[1:]] if len(cols) == 2 else theta[:, cols]


@pytest.mark.parametrize("chunked", [True, False])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_c_and_part_takes_scikit_learns_iterations_to_its_coefficients(n_classes, chunked):
    x, labels, groups = _data(seed=1, n_classes=n_classes)
    x[:, 4] = 2.5  # a constant column (scale 1, as StandardScaler)
    if n_classes == 3:
        labels[groups == "g03"] = 3  # a class absent from one inner-training part (binary-free there)
    classes = np.unique(labels)
    folds = list(InnerGroupSplit(42).split(x, labels, groups))
    path = LogisticPath(chunked=chunked).fit(x, labels, folds, classes)
    parts = [tr for tr, _ in folds] + [np.arange(len(x))]
    for g, c in enumerate(sorted(LOGISTIC_CS)):
        for p, rows in enumerate(parts):
            ref, n_iter = _sklearn_fit(x[rows], labels[rows], c)
            assert path.iterations_[g, p] == n_iter, (c, p)
            np.testing.assert_allclose(_ours(path, g, p, np.unique(labels[rows]), classes), ref, rtol=0,
                                       atol=COEF_ATOL, err_msg=f"C={c} part {p}")


def test_folds_that_do_not_partition_the_rows_replay_the_same_way():
    x, labels, groups = _data(seed=2)
    folds = [(tr[:-4], va) for tr, va in InnerGroupSplit(42).split(x, labels, groups)]  # not a partition
    path = LogisticPath(cs=(0.1, 10.0)).fit(x, labels, folds, np.unique(labels))
    for g, c in enumerate((0.1, 10.0)):
        for p, (tr, _) in enumerate(folds):
            ref, n_iter = _sklearn_fit(x[tr], labels[tr], c)
            assert path.iterations_[g, p] == n_iter
            np.testing.assert_allclose(path.solutions_[g][p].numpy(), ref, atol=COEF_ATOL)


@pytest.mark.parametrize(("tol", "max_iter"), [(1e-2, 1000), (1e-4, 3)])
def test_the_stops_are_scikit_learns(tol, max_iter):
    """The gradient stop at another ``tol``, and the iteration cap, end where scikit-learn's do."""
    x, labels, groups = _data(seed=3)
    folds = list(InnerGroupSplit(42).split(x, labels, groups))
    path = LogisticPath(cs=(1.0,), tol=tol, max_iter=max_iter).fit(x, labels, folds, np.unique(labels))
    ref, n_iter = _sklearn_fit(x, labels, 1.0, tol=tol, max_iter=max_iter)
    assert path.iterations_[0, -1] == n_iter <= max_iter
    np.testing.assert_allclose(path.solutions_[0][-1].numpy(), ref, atol=COEF_ATOL)
    if max_iter == 1000:  # a looser tolerance stops earlier than the default's
        assert n_iter < _sklearn_fit(x, labels, 1.0)[1]


def test_selection_is_scikit_learns_where_the_optimum_would_pick_another_c():
    """On these data scikit-learn's early stop picks C=10 and the exact optimum C=1: we pick what it does."""
    rng = np.random.default_rng(27)
    groups = np.repeat([f"g{i:02d}" for i in range(16)], 15)
    x = rng.normal(size=(240, 40)) + rng.normal(size=(16, 40)).repeat(15, axis=0)
    y = x[:, :5] @ rng.normal(size=5) + rng.normal(0, 3, 240)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    folds = list(InnerGroupSplit(42).split(x, labels, groups))
    ours = GroupGridSearch(LogisticFamily(), "classification", "window", seed=42).fit(x, labels, groups,
                                                                                     folds=folds)
    ref = GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
                       {"logisticregression__C": list(LOGISTIC_CS)}, scoring="balanced_accuracy",
                       cv=folds).fit(x, labels)
    tight = GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression(max_iter=100000, tol=1e-10)),
                         {"logisticregression__C": list(LOGISTIC_CS)}, scoring="balanced_accuracy",
                         cv=folds).fit(x, labels)
    assert tight.best_params_["logisticregression__C"] != ref.best_params_["logisticregression__C"]
    assert ours.best_params_["C"] == ref.best_params_["logisticregression__C"]
    np.testing.assert_allclose([s["mean_score"] for s in ours.cv_scores_], ref.cv_results_["mean_test_score"],
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.predict(x).values, ref.predict_proba(x), atol=1e-8)


@pytest.mark.parametrize("scale", [0.05, 400.0])  # ordinary logits, and logits past exp's range
def test_chunked_objective_equals_the_all_rows_one(scale):
    """Per-chunk products against a reference class give the weighted all-rows objective and gradient."""
    import torch

    from ppgbench_pl.probes import logistic

    x, labels, groups = _data(seed=4)
    labels[groups == "g05"] = 3  # a class absent from one inner part
    classes = np.unique(labels)
    folds = list(InnerGroupSplit(42).split(x, labels, groups))
    path = LogisticPath(cs=(1.0,), max_iter=1).fit(x, labels, folds, classes)  # builds the parts
    codes = np.searchsorted(classes, labels)
    n, d, k = len(x), x.shape[1], len(classes)
    free = torch.as_tensor(path._free)
    absent = torch.as_tensor(~path._present)
    chunked = logistic._ChunkedRows(path._x0, codes, folds, path._parts, free, absent, k)
    mask = torch.zeros(len(folds) + 1, n, dtype=torch.float64)
    for p, tr in enumerate([*(tr for tr, _ in folds), np.arange(n)]):
        mask[p, tr] = 1.0
    onehot = torch.nn.functional.one_hot(torch.as_tensor(codes), k).to(torch.float64)
    full = logistic._Problem(path._x0, onehot, mask, path._parts, free, absent)
    pid = torch.tensor([0, 1, 2, 3, 4, 4, 2])
    c = torch.tensor([0.01, 1.0, 10.0, 0.1, 1.0, 0.001, 3.0], dtype=torch.float64)
    theta = torch.randn(len(pid), d + 1, k, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    theta = theta * scale * free[pid].to(torch.float64)[:, None, :]
    f_chunked, g_chunked = chunked.loss_grad(theta, c, pid)
    f_full, g_full = full.loss_grad(theta, c, pid, cache=False)
    assert torch.isfinite(f_chunked).all() and torch.isfinite(g_chunked).all()
    np.testing.assert_allclose(f_chunked.numpy(), f_full.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g_chunked.numpy(), g_full.numpy(), rtol=1e-9, atol=1e-12)
    f0, g0 = chunked.loss_grad(torch.zeros_like(theta), c, pid)  # the start, without products
    f0_full, g0_full = full.loss_grad(torch.zeros_like(theta), c, pid, cache=False)
    np.testing.assert_allclose(f0.numpy(), f0_full.numpy(), rtol=1e-14)
    np.testing.assert_allclose(g0.numpy(), g0_full.numpy(), atol=1e-14)
