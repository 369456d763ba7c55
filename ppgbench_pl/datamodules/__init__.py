"""LightningDataModules that own subject-disjoint folds."""

from ppgbench_pl.datamodules.ppg import PPGDataModule

__all__ = ["PPGDataModule"]
