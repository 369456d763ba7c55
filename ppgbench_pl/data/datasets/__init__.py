"""Raw datasets, two modules each: ``<key>_info.py`` declares it, ``<key>.py`` preprocesses it.

The declaration (facts, tasks, download source; see :mod:`ppgbench_pl.data.spec`) is light, so the
registry and ``ppgbench list`` never import the readers; the preprocessor it names by ``module:Class``
imports pandas, scipy, h5py, wfdb or openpyxl and is loaded only by :func:`preprocessor`. This package's
own import is light too (nothing here imports a reader at module level).

Adding a dataset ``foo``:

1. ``foo_info.py``: ``DECLARATION = DatasetDeclaration(info=DatasetInfo(...), tasks=(TaskSpec(...), ...),
   source=...)``, importing only :mod:`ppgbench_pl.data.spec` and the standard library;
2. ``foo.py``: a :class:`~ppgbench_pl.data.datasets.base.RawDataset` subclass with ``key = "foo"``, named
   by ``DatasetInfo.preprocessor`` (``"ppgbench_pl.data.datasets.foo:FooDataset"``);
3. ``tests/data/foo/make_data.py`` with ``make(root)`` writing a tiny raw tree;
4. ``"foo"`` in :data:`ppgbench_pl.data.registry.DATASET_KEYS`.

``tests/data/test_registry.py`` then checks the declaration and runs fixture -> preprocess -> task views.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import ConfigError

if TYPE_CHECKING:
    from ppgbench_pl.data.datasets.base import RawDataset

__all__ = ["REAL_DATASETS", "preprocessor"]


def preprocessor(key: str) -> type[RawDataset]:
    """The preprocessor class a dataset's declaration names (any declared dataset, synthetic included)."""
    from ppgbench_pl.data.registry import DATASETS, REAL_DATASETS

    info = DATASETS.get(key)
    if info is None or not info.preprocessor:
        raise ConfigError(f"no preprocessor for dataset '{key}'; known: {', '.join(REAL_DATASETS)}")
    module, _, attr = info.preprocessor.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    """``REAL_DATASETS`` comes from the registry, read on first use (the registry imports this package)."""
    if name == "REAL_DATASETS":
        from ppgbench_pl.data.registry import REAL_DATASETS

        return REAL_DATASETS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
