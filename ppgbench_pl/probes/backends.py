"""Where random forests run: scikit-learn on the CPU or RAPIDS cuML on a GPU (PROTOCOL.md 4.2), same grid names."""

from __future__ import annotations

from typing import Any

from ppgbench_pl.errors import ConfigError

BACKENDS: tuple[str, ...] = ("auto", "sklearn", "cuml")
#: Histogram bins of cuML's quantile split search, as published.
CUML_N_BINS = 128


def cuml_usable() -> bool:
    """Whether cuML can actually fit here: cuML is installed and CuPy sees a CUDA device (decision #25)."""
    import importlib.util

    try:
        if importlib.util.find_spec("cuml") is None:
            return False
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # noqa: BLE001 - missing module, missing driver, CUDA runtime errors: all mean "no"
        return False


def resolve_backend(backend: str) -> str:
    """The concrete backend for a requested one (``auto``: cuML when usable); ``ConfigError`` if it cannot run."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown forest backend '{backend}'; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "cuml" if cuml_usable() else "sklearn"
    if backend == "cuml" and not cuml_usable():
        raise ConfigError("forest backend 'cuml' requested, but no CUDA device is usable through CuPy/cuML; "
                          "install the gpu extra on a GPU machine, or use backend 'sklearn' or 'auto'")
    return backend


def forest_backend_for(kind: str, backend: str) -> str:
    """The backend a task kind really uses: multi-output regression always runs in scikit-learn (cuML: one target)."""
    return "sklearn" if kind == "regression_cls" else backend


def make_forest(kind: str, params: dict[str, Any], seed: int, backend: str, n_jobs: int = -1) -> Any:
    """An unfitted random forest for one grid point (a cuML run's multi-output fallback uses one worker)."""
    if forest_backend_for(kind, backend) == "cuml":  # imported here: optional and slow to import
        from cuml.ensemble import RandomForestClassifier as CuClassifier
        from cuml.ensemble import RandomForestRegressor as CuRegressor

        cu = CuClassifier if kind == "classification" else CuRegressor
        return cu(**params, n_bins=CUML_N_BINS, random_state=seed, output_type="numpy")
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if kind == "classification" else RandomForestRegressor
    return cls(**params, random_state=seed, n_jobs=1 if backend == "cuml" else n_jobs)
