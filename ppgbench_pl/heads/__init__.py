"""Prediction heads built from (input size, number of outputs)."""

from ppgbench_pl.heads.mlp import MLPHead

__all__ = ["MLPHead"]
