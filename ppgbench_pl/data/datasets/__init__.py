"""Raw datasets: each is declared in ``data/datasets.json`` and preprocessed by ``<key>.py``.

Adding ``foo``: its entry in ``datasets.json`` (facts, tasks, source, card; a source's code-valued fields in
:mod:`.selection`), ``foo.py`` (a :class:`~.base.RawDataset` named by ``DatasetInfo.preprocessor``) and
``tests/data/foo/make_data.py``; ``tests/data/test_registry.py`` checks them.
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
