"""LightningDataModules that own subject-disjoint folds."""

from ppgbench_pl.datamodules.job import JobDataModule
from ppgbench_pl.datamodules.ppg import PPGDataModule

__all__ = ["JobDataModule", "PPGDataModule"]
