"""Hyperparameter search of the neural regimes: Optuna TPE + Hyperband, trials in one Lightning stack or per trial."""

from ppgbench_pl.hpo.optuna_search import PersistentStudy, SearchFailed, SearchSettings, TrialOutcome
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE, MLP_SPACE

__all__ = ["FINETUNE_SPACE", "MLP_SPACE", "PersistentStudy", "SearchFailed", "SearchSettings", "TrialOutcome"]
