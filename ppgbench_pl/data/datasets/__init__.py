"""Raw datasets: each is declared in ``data/datasets.json`` and preprocessed by ``<key>.py``.

Adding ``foo``: its entry in ``datasets.json`` (facts, tasks, source, card; a source's code-valued fields in
:mod:`ppgbench_pl.data.selection`), ``foo.py`` (a :class:`~.base.RawDataset` named by ``DatasetInfo.preprocessor``)
and ``tests/data/foo/make_data.py``; ``tests/data/test_registry.py`` checks them.
"""

from ppgbench_pl.data.registry import REAL_DATASETS, preprocessor

__all__ = ["REAL_DATASETS", "preprocessor"]
