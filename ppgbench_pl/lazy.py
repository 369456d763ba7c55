"""Package attributes imported on first use (PEP 562), so importing a package stays torch-free."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``name`` from ``<package>.<table[name]>`` once, when first asked for."""

    def __getattr__(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(f"{package}.{table[name]}"), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
