"""The bad-input corpus: hostile, damaged and nonsensical input through the ``ppgbench`` front door."""
