"""Hyperparameter search for the neural regimes: Optuna TPE + Hyperband studies trained as one Lightning stack.

Trials stack (:mod:`~ppgbench_pl.hpo.trial_stack`, :mod:`~ppgbench_pl.hpo.stack_search`) or fit one by one
(:mod:`~ppgbench_pl.hpo.per_trial`); a resume replays the sampler (:mod:`~ppgbench_pl.hpo.replay`).
"""

from ppgbench_pl.hpo.optuna_search import PersistentStudy, SearchFailed, SearchSettings, TrialOutcome
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE, MLP_SPACE

__all__ = ["FINETUNE_SPACE", "MLP_SPACE", "PersistentStudy", "SearchFailed", "SearchSettings", "TrialOutcome"]
