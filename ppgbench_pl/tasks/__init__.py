"""LightningModules: encoders with heads (frozen/finetune) and the fit-once probe adapter.

Both are imported on first use (PEP 562): ``ppgbench fit --help`` needs ``EncoderTask`` only, and the probe
adapter pulls in scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppgbench_pl.tasks.encoder_task import EncoderTask
    from ppgbench_pl.tasks.probe_task import ProbeTask

_LAZY = {"EncoderTask": "encoder_task", "ProbeTask": "probe_task"}


def __getattr__(name: str) -> Any:
    """Import a task class when it is first asked for."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EncoderTask", "ProbeTask"]
