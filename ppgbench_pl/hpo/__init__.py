"""Hyperparameter search for the neural regimes: Optuna TPE + Hyperband studies and their trial engines.

* :mod:`~ppgbench_pl.hpo.optuna_search`: studies on persistent storage, ask/tell driver, budget, records.
* :mod:`~ppgbench_pl.hpo.spaces`: the protocol search spaces.
* :mod:`~ppgbench_pl.hpo.lightning_trial`: one trial as a Lightning ``Trainer.fit`` (the reference engine).
* :mod:`~ppgbench_pl.hpo.batched_mlp`: many MLP-probe trials trained at once as one stacked model.
* :mod:`~ppgbench_pl.hpo.shuffle`, :mod:`~ppgbench_pl.hpo.trial_store`: per-trial batches, best weights.
"""

from ppgbench_pl.hpo.optuna_search import SearchFailed, SearchSettings, TrialOutcome, run_search
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE, MLP_SPACE

__all__ = ["FINETUNE_SPACE", "MLP_SPACE", "SearchFailed", "SearchSettings", "TrialOutcome", "run_search"]
