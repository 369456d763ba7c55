"""Running the protocol: plans of jobs, the embedding cache, run identity, executors, W&B mirroring.

``ppgbench fit`` runs one datamodule's plan in-process (:mod:`.runner`); ``ppgbench benchmark`` runs a
multi-dataset suite from a config dict on any executor (:mod:`.coordinator`, :mod:`.executors`,
:mod:`.worker`). Both write the same per-job records, and the record on disk is what says a job is done.
"""
