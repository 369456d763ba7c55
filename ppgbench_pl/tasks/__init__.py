"""LightningModules: ``EncoderTask`` and ``ProbeTask``, imported on first use (``fit --help`` skips scikit-learn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppgbench_pl.lazy import lazy_getattr

if TYPE_CHECKING:
    from ppgbench_pl.tasks.encoder_task import EncoderTask
    from ppgbench_pl.tasks.probe_task import ProbeTask

_LAZY = {"EncoderTask": "encoder_task", "ProbeTask": "probe_task"}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["EncoderTask", "ProbeTask"]
