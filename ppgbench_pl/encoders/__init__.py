"""Encoders: one plain ``nn.Module`` per model on the :class:`PPGEncoder` contract, and their registry.

``ENCODERS[name]()`` builds a model with its published settings. The registry is an explicit table of
import paths (no registration by import side effect) resolved on first use, so listing names does not
import ``transformers`` or build a 35M-parameter model.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import ConfigError

if TYPE_CHECKING:  # imported on first use (below): ``ppgbench list`` reads the torch-free catalog
    from ppgbench_pl.encoders.base import PPGEncoder

_PATHS: dict[str, str] = {
    "papagei_p": "ppgbench_pl.encoders.papagei:PaPaGeiPEncoder",
    "papagei_s": "ppgbench_pl.encoders.papagei:PaPaGeiSEncoder",
    "pulseppg": "ppgbench_pl.encoders.pulseppg:PulsePPGEncoder",
    "anyppg": "ppgbench_pl.encoders.anyppg:AnyPPGEncoder",
    "sigmappg": "ppgbench_pl.encoders.sigmappg:SigmaPPGEncoder",
    "moment_small": "ppgbench_pl.encoders.moment:MomentSmallEncoder",
    "prv": "ppgbench_pl.encoders.prv:PRVEncoder",
    "prv_published": "ppgbench_pl.encoders.prv:PublishedPRVEncoder",
    "small_cnn": "ppgbench_pl.encoders.cnn:SmallCNNEncoder",
}

#: The six external foundation models (the others are controls or test stand-ins).
FOUNDATION_MODELS = ("papagei_p", "papagei_s", "pulseppg", "anyppg", "sigmappg", "moment_small")


class _Registry(Mapping[str, "type[PPGEncoder]"]):
    """Name -> encoder class, imported lazily."""

    def __getitem__(self, name: str) -> type[PPGEncoder]:
        if name not in _PATHS:
            known = ", ".join(sorted(_PATHS))
            raise ConfigError(f"unknown encoder '{name}'; known: {known} (or give a class_path)")
        module, _, attr = _PATHS[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    def __iter__(self) -> Iterator[str]:
        return iter(_PATHS)

    def __len__(self) -> int:
        return len(_PATHS)


ENCODERS: Mapping[str, type[PPGEncoder]] = _Registry()


def __getattr__(name: str) -> Any:
    """``PPGEncoder`` is imported (with torch) when first asked for."""
    if name == "PPGEncoder":
        from ppgbench_pl.encoders.base import PPGEncoder

        globals()[name] = PPGEncoder
        return PPGEncoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ENCODERS", "FOUNDATION_MODELS", "PPGEncoder"]
