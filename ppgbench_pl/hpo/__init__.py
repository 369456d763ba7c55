"""Hyperparameter search for the neural regimes: Optuna TPE + Hyperband studies trained as one Lightning stack.

* :mod:`~ppgbench_pl.hpo.optuna_search`: budgets, studies searched in memory and kept on durable storage.
* :mod:`~ppgbench_pl.hpo.spaces`: the protocol search spaces.
* :mod:`~ppgbench_pl.hpo.replay`: a resumed study replays its sampler's asks (the uninterrupted search's draws).
* :mod:`~ppgbench_pl.hpo.trial_stack`: the LightningModule that trains many trials in one ``Trainer.fit``.
* :mod:`~ppgbench_pl.hpo.stack_search`: which trials fill the stack; report, prune, refill after each epoch.
* :mod:`~ppgbench_pl.hpo.per_trial`: each trial a LightningModule (``backbone``, ``head``) in a fit of its own,
  for callbacks that are not stack-aware (Lightning's own).
* :mod:`~ppgbench_pl.hpo.shuffle`, :mod:`~ppgbench_pl.hpo.trial_store`: per-trial batches, best weights.
"""

from ppgbench_pl.hpo.optuna_search import PersistentStudy, SearchFailed, SearchSettings, TrialOutcome
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE, MLP_SPACE

__all__ = ["FINETUNE_SPACE", "MLP_SPACE", "PersistentStudy", "SearchFailed", "SearchSettings", "TrialOutcome"]
