"""Data layer: processed store, task registry, splits, task views and the synthetic dataset."""
