"""Regimes: Lightning callbacks that score a head on one outer fold; imported on first use (``list``: no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppgbench_pl.lazy import lazy_getattr

if TYPE_CHECKING:
    from ppgbench_pl.regimes.base import JobContext, Regime, RepeatOutcome
    from ppgbench_pl.regimes.finetune import FinetuneRegime
    from ppgbench_pl.regimes.forest import RandomForestRegime
    from ppgbench_pl.regimes.label_efficiency import LabelEfficiencyRegime
    from ppgbench_pl.regimes.linear import LinearRegime, ProbeRegime
    from ppgbench_pl.regimes.mlp import MLPRegime

_LAZY = {
    "JobContext": "base", "Regime": "base", "RepeatOutcome": "base", "FinetuneRegime": "finetune",
    "RandomForestRegime": "forest", "LabelEfficiencyRegime": "label_efficiency", "LinearRegime": "linear",
    "ProbeRegime": "linear", "MLPRegime": "mlp",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "FinetuneRegime", "JobContext", "LabelEfficiencyRegime", "LinearRegime", "MLPRegime", "ProbeRegime",
    "RandomForestRegime", "Regime", "RepeatOutcome",
]
