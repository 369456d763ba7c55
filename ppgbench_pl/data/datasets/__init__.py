"""Raw datasets: each is declared in ``data/datasets.json`` and preprocessed by ``<key>.py``.

Adding ``foo``: its entry in ``datasets.json`` (facts, tasks, source, card; code-valued source fields in
:data:`ppgbench_pl.data.registry.STEPS`), ``foo.py`` (the :class:`~.base.RawDataset` its ``preprocessor``
names) and ``tests/data/foo/make_data.py``; ``tests/data/test_registry.py`` checks them.
"""

from ppgbench_pl.data.registry import REAL_DATASETS, preprocessor

__all__ = ["REAL_DATASETS", "preprocessor"]
