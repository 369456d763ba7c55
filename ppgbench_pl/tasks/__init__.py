"""LightningModules: encoders with heads (frozen/finetune) and the fit-once probe adapter.

Both are imported on first use (PEP 562): ``ppgbench fit --help`` needs ``EncoderTask`` only, and the probe
adapter pulls in scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppgbench_pl.lazy import lazy_getattr

if TYPE_CHECKING:
    from ppgbench_pl.tasks.encoder_task import EncoderTask
    from ppgbench_pl.tasks.probe_task import ProbeTask

_LAZY = {"EncoderTask": "encoder_task", "ProbeTask": "probe_task"}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["EncoderTask", "ProbeTask"]
