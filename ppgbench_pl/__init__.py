"""ppgbench: one controlled protocol for evaluating PPG foundation models."""

__version__ = "0.1.0"
