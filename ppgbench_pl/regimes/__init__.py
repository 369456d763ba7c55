"""regimes."""
