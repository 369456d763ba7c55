"""The published logistic probe (scikit-learn lbfgs at its defaults) is the linear regime's default."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.data.splits import InnerGroupSplit
from ppgbench_pl.probes.families import LogisticFamily, RidgeFamily
from ppgbench_pl.probes.linear import LOGISTIC_CS, SingleClassError
from ppgbench_pl.probes.search import GroupGridSearch
from ppgbench_pl.regimes.linear import LinearRegime


class _Ctx:
    def __init__(self, name):
        self.task = get_task(name)


def test_the_linear_regime_fits_logistic_probes_with_scikit_learn():
    regime = LinearRegime()
    assert isinstance(regime.family(_Ctx("synthetic-activity")), LogisticFamily)
    assert isinstance(regime.family(_Ctx("synthetic-hr")), RidgeFamily)
    assert regime.backend() == "sklearn"
    assert "logistic_solver" not in regime.settings()  # the batched solver is gone, and with it the option
    with pytest.raises(TypeError, match="logistic_solver"):
        LinearRegime(logistic_solver="batched")


def _data(seed=0, n=240, d=12, k=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    x = rng.normal(size=(n, d)) + 0.6 * np.eye(k, d)[y]
    groups = np.repeat(np.arange(24), n // 24).astype(str)
    return x, y, groups


def test_fit_one_is_scikit_learns_pipeline_exactly():
    x, y, _ = _data()
    family = LogisticFamily()
    model = family.fit_one(x, y, {"C": 0.1}, np.unique(y), 42)
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, solver="lbfgs", max_iter=1000,
                                                             random_state=42)).fit(x, y)
    np.testing.assert_array_equal(family.predict(model, x, np.unique(y)).values, ref.predict_proba(x))


def test_grid_search_selects_what_gridsearchcv_selects():
    x, y, groups = _data(1)
    folds = list(InnerGroupSplit(42, 4).split(x, y, groups))
    search = GroupGridSearch(LogisticFamily(), "classification", "window", 42, 4, "auroc")
    search.fit(x, y, groups, folds=folds)
    ref = GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression(solver="lbfgs", max_iter=1000,
                                                                          random_state=42)),
                       {"logisticregression__C": list(LOGISTIC_CS)}, cv=folds, scoring="balanced_accuracy").fit(x, y)
    assert ref.best_params_["logisticregression__C"] == search.best_params_["C"]


def test_a_single_class_part_raises_as_scikit_learn_does_unless_asked():
    x, _, _ = _data()
    y = np.zeros(len(x), dtype=int)
    with pytest.raises(SingleClassError, match="single class"):
        LogisticFamily().fit_one(x, y, {"C": 1.0}, np.array([0, 1]), 0)
    constant = LogisticFamily(single_class="constant")
    pred = constant.predict(constant.fit_one(x, y, {"C": 1.0}, np.array([0, 1]), 0), x[:3], np.array([0, 1]))
    np.testing.assert_array_equal(pred.values, [[1.0, 0.0]] * 3)
