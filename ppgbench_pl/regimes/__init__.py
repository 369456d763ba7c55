"""Regimes: Lightning callbacks that select, train and score a head on one outer fold."""

from ppgbench_pl.regimes.base import JobContext, Regime, RepeatOutcome
from ppgbench_pl.regimes.finetune import FinetuneRegime
from ppgbench_pl.regimes.forest import RandomForestRegime
from ppgbench_pl.regimes.label_efficiency import LabelEfficiencyRegime
from ppgbench_pl.regimes.linear import LinearRegime, ProbeRegime
from ppgbench_pl.regimes.mlp import MLPRegime

__all__ = [
    "FinetuneRegime", "JobContext", "LabelEfficiencyRegime", "LinearRegime", "MLPRegime", "ProbeRegime",
    "RandomForestRegime", "Regime", "RepeatOutcome",
]
