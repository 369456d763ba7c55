"""Raw datasets: each declared in ``data/datasets.json`` and preprocessed by ``<key>.py`` (``test_registry`` checks)."""

from ppgbench_pl.data.registry import REAL_DATASETS, preprocessor

__all__ = ["REAL_DATASETS", "preprocessor"]
