"""Model and dataset cards (pretraining data, provenance, overlap flag, citations): plain data, no numpy."""
