"""Raw-dataset preprocessors, one module per dataset, and the table that names them.

``PREPROCESSORS[key]`` is the :class:`~ppgbench_pl.data.datasets.base.RawDataset` subclass of a dataset;
the table holds import paths resolved on first use (no registration by import side effect).
"""

from __future__ import annotations

import importlib

from ppgbench_pl.data.datasets.base import RawDataset
from ppgbench_pl.errors import ConfigError

_PATHS = {
    "dalia": "dalia:DaliaDataset",
    "dreamt": "dreamt:DreamtDataset",
    "wesad": "wesad:WesadDataset",
    "ecsmp": "ecsmp:EcsmpDataset",
    "ppgbp": "ppgbp:PPGBPDataset",
    "bidmc": "bidmc:BidmcDataset",
    "butppg": "butppg:ButPPGDataset",
    "realworldppg": "realworldppg:RealWorldPPGDataset",
    "wildppg": "wildppg:WildPPGDataset",
}
REAL_DATASETS = tuple(_PATHS)


def preprocessor(key: str) -> type[RawDataset]:
    """The preprocessor class of one of the nine datasets."""
    if key not in _PATHS:
        raise ConfigError(f"no preprocessor for dataset '{key}'; known: {', '.join(_PATHS)}")
    module, _, attr = _PATHS[key].partition(":")
    return getattr(importlib.import_module(f"ppgbench_pl.data.datasets.{module}"), attr)
