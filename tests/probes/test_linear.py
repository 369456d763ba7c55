import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.errors import DataError
from ppgbench_pl.metrics.scores import NotEvaluableError
from ppgbench_pl.probes.families import LogisticFamily, RidgeFamily
from ppgbench_pl.probes.linear import (
    LOGISTIC_CS,
    RIDGE_ALPHAS,
    SingleClassError,
    check_finite,
)
from ppgbench_pl.probes.ridge import RidgeCV
from ppgbench_pl.probes.search import GroupGridSearch


def _data(n_groups=12, per=8, d=20, seed=0):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"g{i:02d}" for i in range(n_groups)], per)
    x = rng.normal(size=(len(groups), d)) + rng.normal(size=(n_groups, d)).repeat(per, axis=0)
    w = rng.normal(size=d)
    return x, x @ w + rng.normal(0, 2.0, size=len(groups)), groups


@pytest.mark.parametrize("shape", [(60, 10), (15, 40)])  # tall and wide
def test_ridge_grid_matches_sklearn_for_every_alpha(shape):
    rng = np.random.default_rng(1)
    x, x_test = rng.normal(size=shape), rng.normal(size=(7, shape[1]))
    x[:, 0] = 3.0  # a constant column (zero std) is handled like StandardScaler does
    y = rng.normal(size=shape[0])
    family = RidgeFamily()
    _, refit = family.cv_fit(x, y, [], None, 0)  # the shared path: every alpha from one decomposition
    grid = [family.predict(refit(g), x_test, None) for g in range(len(RIDGE_ALPHAS))]
    single = [family.predict(family.fit_one(x, y, {"alpha": a}, None, 0), x_test, None) for a in RIDGE_ALPHAS]
    for i, alpha in enumerate(RIDGE_ALPHAS):
        ref = make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(x, y).predict(x_test)
        np.testing.assert_allclose(grid[i].values, ref, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(single[i].values, ref, rtol=1e-7, atol=1e-8)


def test_ridge_grid_multi_output():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 8)), rng.normal(size=(50, 6))
    pred = RidgeCV((10.0,)).fit(x, y, []).refit(10.0).predict(x[:5])
    ref = make_pipeline(StandardScaler(), Ridge(alpha=10.0)).fit(x, y).predict(x[:5])
    np.testing.assert_allclose(pred, ref, rtol=1e-7)


def test_ridge_selection_agrees_with_gridsearchcv():
    x, y, groups = _data()
    ours = GroupGridSearch(RidgeFamily(), "regression", "window", seed=42).fit(x, y, groups)
    folds = list(InnerGroupSplit(42).split(x, y, groups))
    ref = GridSearchCV(make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": list(RIDGE_ALPHAS)},
                       scoring="neg_mean_absolute_error", cv=folds).fit(x, y)
    assert ours.best_params_["alpha"] == ref.best_params_["ridge__alpha"]
    assert ours.best_score_ == pytest.approx(ref.best_score_)
    np.testing.assert_allclose(ours.predict(x[:5]).values, ref.predict(x[:5]), rtol=1e-7)


def test_logistic_selection_agrees_with_gridsearchcv_multiclass():
    x, y, groups = _data(seed=3)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    ours = GroupGridSearch(LogisticFamily(), "classification", "window", seed=43).fit(x, labels, groups)
    folds = list(InnerGroupSplit(43).split(x, labels, groups))
    ref = GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=43)),
                       {"logisticregression__C": list(LOGISTIC_CS)}, scoring="balanced_accuracy",
                       cv=folds).fit(x, labels)
    assert ours.best_params_["C"] == ref.best_params_["logisticregression__C"]
    assert ours.best_score_ == pytest.approx(ref.best_score_)


def test_binary_selection_uses_auroc_and_subject_level_picks_an_aggregation():
    x, y, groups = _data(n_groups=16, seed=4)
    subject_label = (np.array([y[groups == g].mean() for g in np.unique(groups)]) > np.median(y)).astype(int)
    labels = subject_label[np.searchsorted(np.unique(groups), groups)]
    search = GroupGridSearch(LogisticFamily(), "classification", "subject", seed=44).fit(x, labels, groups)
    assert search.aggregation_ in ("mean", "median", "topk_mean")
    assert len(search.cv_scores_) == len(LOGISTIC_CS) * 3
    assert all(0.0 <= c["mean_score"] <= 1.0 for c in search.cv_scores_)
    proba = search.predict(x).values
    assert proba.shape == (len(x), 2) and np.allclose(proba.sum(axis=1), 1.0)


def test_classes_missing_from_an_inner_fold_get_zero_probability():
    x, y, groups = _data(seed=5)
    labels = (y > np.median(y)).astype(int)
    labels[groups == "g00"] = 2  # a class that lives in one group only
    search = GroupGridSearch(LogisticFamily(), "classification", "window", seed=42).fit(x, labels, groups)
    assert search.predict(x).values.shape == (len(x), 3)
    folds = list(InnerGroupSplit(42).split(x, labels, groups))
    family, classes = LogisticFamily(), np.unique(labels)
    missing = 0
    for tr, va in folds:
        proba = family.predict(family.fit_one(x[tr], labels[tr], {"C": 1.0}, classes, 42), x[va], classes).values
        seen = np.isin(classes, labels[tr])
        missing += int(not seen.all())
        np.testing.assert_array_equal(proba[:, ~seen], 0.0)  # a class its training part lacks
        assert (proba[:, seen] > 0).all()
    assert missing == 1  # the fold validating on g00


def test_single_class_training_part_raises_like_sklearn_unless_constant():
    x, y, groups = _data(seed=7)
    labels = np.zeros(len(y), dtype=int)
    labels[groups == "g00"] = 1  # every inner part but one sees class 0 only
    with pytest.raises(ValueError, match="at least 2 classes"):
        LogisticRegression().fit(x[groups != "g00"], labels[groups != "g00"])
    with pytest.raises(SingleClassError, match="single class .0.; logistic regression needs"):
        GroupGridSearch(LogisticFamily(), "classification", "window", seed=42).fit(x, labels, groups)
    search = GroupGridSearch(LogisticFamily(single_class="constant"), "classification", "window",
                             seed=42).fit(x, labels, groups)
    assert search.predict(x).values.shape == (len(x), 2)


def test_outer_training_labels_of_one_class_are_not_evaluable():
    x, _, groups = _data()
    with pytest.raises(NotEvaluableError, match="every training label is class 1"):
        GroupGridSearch(LogisticFamily(), "classification", "window", seed=42).fit(x, np.ones(len(x)), groups)


def test_ridge_cv_matches_sklearn_per_fold_with_and_without_a_partition():
    x, y, groups = _data(seed=8)
    x = x * 50.0 + 1000.0  # a large offset: the sums are taken after centring
    x[:, 2] = -4.0
    y2 = np.c_[y, -2 * y + 1]
    folds = list(InnerGroupSplit(44).split(x, y, groups))
    overlapping = [(tr[: len(tr) - 5], va) for tr, va in folds]  # not a partition: computed per part
    for fold_set in (folds, overlapping):
        for target in (y, y2):
            cv = RidgeCV().fit(x, target, fold_set)
            for (tr, va), ours in zip(fold_set, cv.cv_predictions_, strict=True):
                for a, alpha in enumerate(RIDGE_ALPHAS):
                    ref = make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(x[tr], target[tr])
                    np.testing.assert_allclose(ours[a], ref.predict(x[va]), rtol=1e-8, atol=1e-8)
    ref = make_pipeline(StandardScaler(), Ridge(alpha=10.0)).fit(x, y)
    np.testing.assert_allclose(RidgeCV().fit(x, y, folds).refit(10.0).predict(x[:4]), ref.predict(x[:4]),
                               rtol=1e-9)


def test_non_finite_embeddings_fail_in_one_line():
    x, y, groups = _data()
    x[5, 1] = np.nan
    x[9, 0] = np.inf
    search = GroupGridSearch(RidgeFamily(), "regression", "window", seed=42, what="embeddings of m1")
    with pytest.raises(DataError, match=r"^embeddings of m1 contain NaN/inf in 2 of 96 rows \(first: row 5\)") as err:
        search.fit(x, y, groups)
    assert "\n" not in str(err.value)
    check_finite(np.ones((3, 2)))


@pytest.mark.parametrize("case", ["dense", "constant_column", "one_feature", "singular_at_zero"])
def test_the_ridge_path_solves_every_alpha_exactly(case):
    """The CPU's tridiagonal path and the eigendecomposition give the direct solutions, to roundoff."""
    import torch

    from ppgbench_pl.probes.ridge import _tridiagonal_path, ridge_path

    rng = np.random.default_rng(3)
    d = 1 if case == "one_feature" else 40
    x = rng.normal(size=(200, d))
    if case == "constant_column":
        x[:, 5] = 0.0  # a standardised constant column: a zero row and column in the scatter
    a = x.T @ x
    b = rng.normal(size=(d, 2))
    alphas = np.array([0.0, 1.0, 100.0]) if case == "singular_at_zero" else np.array([0.01, 1.0, 1e4])
    if case == "singular_at_zero":
        a[:, 7] = a[7, :] = 0.0
        assert _tridiagonal_path(a, b, alphas) is None  # alpha 0 on a singular scatter: not positive definite
        return
    direct = np.stack([np.linalg.solve(a + al * np.eye(d), b) for al in alphas])
    ours = ridge_path(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(alphas)).numpy()
    lam, q = np.linalg.eigh(a)
    eig = q @ ((q.T @ b)[None] / (lam[None, :, None] + alphas[:, None, None]))
    scale = np.abs(direct).max()
    assert np.abs(ours - direct).max() <= 1e-10 * scale
    assert np.abs(ours - eig).max() <= 1e-10 * scale
