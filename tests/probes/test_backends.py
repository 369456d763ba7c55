import sys
import types

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.probes import backends
from ppgbench_pl.probes.backends import cuml_usable, forest_backend_for, make_forest, resolve_backend
from ppgbench_pl.probes.forest import ForestFamily

PARAMS = {"n_estimators": 7, "max_depth": 4, "min_samples_split": 2, "min_samples_leaf": 1,
          "max_features": "sqrt"}


def _fake_cupy(count=None, error=None):
    def get_device_count():
        if error is not None:
            raise error
        return count

    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))
    return module


def _fake_cuml():
    import importlib.machinery

    module = types.ModuleType("cuml")
    module.__spec__ = importlib.machinery.ModuleSpec("cuml", None)
    return module


def test_cuml_usable_follows_cupy_device_count(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuml", _fake_cuml())
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=2))
    assert cuml_usable() is True
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=0))
    assert cuml_usable() is False
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(error=RuntimeError("cudaErrorInsufficientDriver")))
    assert cuml_usable() is False
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails
    assert cuml_usable() is False


def test_a_gpu_with_cupy_but_without_cuml_is_not_usable(monkeypatch):
    """CuPy seeing a device was enough: ``auto`` resolved to cuML and every forest job then failed on
    ``import cuml`` instead of running scikit-learn; ``cuml`` was not refused up front."""
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count=2))
    monkeypatch.setitem(sys.modules, "cuml", None)  # not installed
    assert cuml_usable() is False
    assert resolve_backend("auto") == "sklearn"
    with pytest.raises(ConfigError, match="cuml"):
        resolve_backend("cuml")


def test_auto_resolves_to_sklearn_without_gpu(monkeypatch):
    monkeypatch.setattr(backends, "cuml_usable", lambda: False)
    assert resolve_backend("auto") == "sklearn"
    assert resolve_backend("sklearn") == "sklearn"
    monkeypatch.setattr(backends, "cuml_usable", lambda: True)
    assert resolve_backend("auto") == "cuml"
    assert resolve_backend("cuml") == "cuml"


@pytest.mark.skipif(cuml_usable(), reason="a usable GPU is present")
def test_auto_is_sklearn_on_this_machine():
    assert resolve_backend("auto") == "sklearn"


def test_explicit_cuml_without_gpu_is_a_config_error(monkeypatch):
    monkeypatch.setattr(backends, "cuml_usable", lambda: False)
    with pytest.raises(ConfigError, match="cuml"):
        resolve_backend("cuml")
    with pytest.raises(ConfigError, match="unknown forest backend"):
        resolve_backend("xgboost")


def test_sklearn_factory_uses_seed_and_n_jobs():
    reg = make_forest("regression", PARAMS, seed=43, backend="sklearn", n_jobs=3)
    clf = make_forest("classification", PARAMS, seed=44, backend="sklearn")
    assert isinstance(reg, RandomForestRegressor) and isinstance(clf, RandomForestClassifier)
    assert (reg.random_state, reg.n_jobs, reg.max_depth, reg.n_estimators) == (43, 3, 4, 7)
    assert (clf.random_state, clf.n_jobs, clf.max_features) == (44, -1, "sqrt")
    assert clf.class_weight is None


def test_multi_output_always_falls_back_to_sklearn():
    assert forest_backend_for("regression_cls", "cuml") == "sklearn"
    assert forest_backend_for("regression", "cuml") == "cuml"
    # Built without touching cuML: single-process scikit-learn as published for the GPU run.
    model = make_forest("regression_cls", PARAMS, seed=42, backend="cuml", n_jobs=-1)
    assert isinstance(model, RandomForestRegressor) and model.n_jobs == 1
    assert make_forest("regression_cls", PARAMS, seed=42, backend="sklearn", n_jobs=2).n_jobs == 2


@pytest.mark.skipif(not cuml_usable(), reason="needs a CUDA device and cuML")
def test_cuml_forest_fits_and_aligns_classes():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8))
    y_cls = np.where(x[:, 0] > 0, 7, 3)
    family = ForestFamily(n_estimators=(20,), max_depth=(5,), backend="cuml", n_jobs=1)
    classes = np.array([1, 3, 7])
    model = family.fit_one(x, y_cls, family.grid()[0], classes, seed=42)
    assert model.backend == "cuml"
    pred = family.predict(model, x, classes)
    assert pred.values.shape == (200, 3) and np.allclose(pred.values[:, 0], 0.0)
    assert np.mean(pred.labels == y_cls) > 0.9
    y_reg = 2.0 * x[:, 1]
    reg = family.predict(family.fit_one(x, y_reg, family.grid()[0], None, seed=42), x, None)
    assert reg.values.shape == (200,) and np.mean(np.abs(reg.values - y_reg)) < np.mean(np.abs(y_reg))
