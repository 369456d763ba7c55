"""Prediction heads built from (input size, number of outputs)."""

from ppgbench_pl.heads.mlp import LinearHead, MLPHead

__all__ = ["LinearHead", "MLPHead"]
