"""Running the protocol: plans of jobs, the embedding cache, run identity, executors, W&B mirroring."""
