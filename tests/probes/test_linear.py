import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.probes.families import LogisticFamily, RidgeFamily
from ppgbench_pl.probes.linear import LOGISTIC_CS, RIDGE_ALPHAS, RidgeGrid
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
    grid = RidgeGrid().fit(x, y).predict_all(x_test)
    for i, alpha in enumerate(RIDGE_ALPHAS):
        ref = make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(x, y).predict(x_test)
        np.testing.assert_allclose(grid[i], ref, rtol=1e-7, atol=1e-8)


def test_ridge_grid_multi_output():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 8)), rng.normal(size=(50, 6))
    pred = RidgeGrid(alpha=10.0).fit(x, y).predict(x[:5])
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
                       {"logisticregression__C": list(LOGISTIC_CS)}, scoring="balanced_accuracy", cv=folds).fit(x, labels)
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
    labels = np.zeros(len(y), dtype=int)
    labels[groups == "g00"] = 2  # a class that lives in one group only
    labels[groups == "g01"] = 1
    search = GroupGridSearch(LogisticFamily(), "classification", "window", seed=42).fit(x, labels, groups)
    assert search.predict(x).values.shape == (len(x), 3)
