import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from ppgbench_pl.probes.forest import ForestFamily
from ppgbench_pl.probes.search import GroupGridSearch

SMALL = {"n_estimators": (12,), "max_depth": (3, 6), "n_jobs": 1}


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 6))
    groups = np.repeat([f"g{i}" for i in range(12)], 10)
    return x, groups, rng


def test_default_grid_is_published():
    grid = ForestFamily().grid()
    assert [p["max_depth"] for p in grid] == [5, 10, 20]
    assert all(p["n_estimators"] == 100 and p["min_samples_split"] == 2 and p["min_samples_leaf"] == 1
               and p["max_features"] == "sqrt" for p in grid)


def test_grid_is_configurable_and_ordered():
    grid = ForestFamily(n_estimators=(10, 20), max_depth=(2, 4)).grid()
    assert [(p["n_estimators"], p["max_depth"]) for p in grid] == [(10, 2), (10, 4), (20, 2), (20, 4)]
    with pytest.raises(ValueError, match="max_depth"):
        ForestFamily(max_depth=())


def test_regression_matches_plain_sklearn(data):
    x, _, rng = data
    y = x[:, 0] * 3 + rng.normal(scale=0.1, size=len(x))
    family = ForestFamily(**SMALL)
    for params in family.grid():
        ours = family.predict(family.fit_one(x[:80], y[:80], params, None, seed=43), x[80:], None)
        ref = RandomForestRegressor(**params, random_state=43, n_jobs=1).fit(x[:80], y[:80]).predict(x[80:])
        assert ours.kind == "regression"
        np.testing.assert_array_equal(ours.values, ref)


def test_classification_matches_plain_sklearn_with_aligned_classes(data):
    x, _, _ = data
    y = np.where(x[:, 0] > 0.3, 5, np.where(x[:, 1] > 0, 2, 0))
    classes = np.array([0, 2, 4, 5])  # 4 never appears in training
    family = ForestFamily(**SMALL)
    params = family.grid()[1]
    ours = family.predict(family.fit_one(x[:80], y[:80], params, classes, seed=44), x[80:], classes)
    ref = RandomForestClassifier(**params, random_state=44, n_jobs=1).fit(x[:80], y[:80])
    proba = ref.predict_proba(x[80:])
    np.testing.assert_array_equal(ours.values[:, [0, 1, 3]], proba)
    np.testing.assert_array_equal(ours.values[:, 2], 0.0)
    np.testing.assert_array_equal(ours.labels, ref.predict(x[80:]))


def test_parallel_fit_agrees_up_to_summation_order(data):
    x, _, _ = data
    y = x[:, 0] - x[:, 1]
    params = ForestFamily(**SMALL).grid()[1]
    serial = ForestFamily(**SMALL).fit_one(x, y, params, None, seed=42)
    parallel = ForestFamily(**{**SMALL, "n_jobs": 2}).fit_one(x, y, params, None, seed=42)
    assert parallel.model.n_jobs == 2
    np.testing.assert_allclose(ForestFamily().predict(parallel, x, None).values,
                               ForestFamily().predict(serial, x, None).values, rtol=1e-12)


def test_multi_output_regression(data):
    x, _, _ = data
    y = np.stack([x[:, 0], -x[:, 1], x[:, 2] ** 2], axis=1)
    family = ForestFamily(**SMALL)
    params = family.grid()[0]
    ours = family.predict(family.fit_one(x[:80], y[:80], params, None, seed=42), x[80:], None)
    ref = RandomForestRegressor(**params, random_state=42, n_jobs=1).fit(x[:80], y[:80]).predict(x[80:])
    assert ours.kind == "regression_cls" and ours.values.shape == (40, 3)
    np.testing.assert_array_equal(ours.values, ref)


def test_single_training_class_is_predicted_with_certainty(data):
    x, _, _ = data
    family = ForestFamily(**SMALL)
    classes = np.array([0, 1])
    model = family.fit_one(x, np.ones(len(x), int), family.grid()[0], classes, 42)
    pred = family.predict(model, x[:5], classes)
    np.testing.assert_array_equal(pred.values, np.tile([0.0, 1.0], (5, 1)))


def test_group_grid_search_refits_the_chosen_point(data):
    x, groups, rng = data
    y = x[:, 0] * 2 + rng.normal(scale=0.05, size=len(x))
    family = ForestFamily(n_estimators=(10,), max_depth=(1, 8), n_jobs=1)
    search = GroupGridSearch(family, "regression", "window", seed=42).fit(x, y, groups)
    assert search.best_params_["max_depth"] == 8  # a stump cannot follow a linear trend
    assert len(search.cv_scores_) == 2 and all(len(c["fold_scores"]) == 4 for c in search.cv_scores_)
    ref = RandomForestRegressor(**search.best_params_, random_state=42, n_jobs=1).fit(x, y)
    np.testing.assert_array_equal(search.predict(x).values, ref.predict(x))
