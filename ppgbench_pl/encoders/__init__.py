"""Encoders on the :class:`PPGEncoder` contract; ``ENCODERS[name]()`` imports a model's class on first use."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ppgbench_pl.encoders.catalog import CATALOG, REGISTERED
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.lazy import lazy_getattr

if TYPE_CHECKING:
    from ppgbench_pl.encoders.base import PPGEncoder

#: The six external foundation models (the others are controls or test stand-ins).
FOUNDATION_MODELS = ("papagei_p", "papagei_s", "pulseppg", "anyppg", "sigmappg", "moment_small")


class _Registry(Mapping[str, "type[PPGEncoder]"]):
    """Name -> encoder class, imported lazily."""

    def __getitem__(self, name: str) -> type[PPGEncoder]:
        if name not in REGISTERED:
            known = ", ".join(sorted(REGISTERED))
            raise ConfigError(f"unknown encoder '{name}'; known: {known} (or give a class_path)")
        module, _, attr = CATALOG[name].class_path.rpartition(".")
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTERED)

    def __len__(self) -> int:
        return len(REGISTERED)


ENCODERS: Mapping[str, type[PPGEncoder]] = _Registry()


__getattr__ = lazy_getattr(__name__, {"PPGEncoder": "base"})  # it imports torch


__all__ = ["ENCODERS", "FOUNDATION_MODELS", "PPGEncoder"]
