"""Model and dataset cards: pretraining data, provenance, the overlap flag, citations (plain data, no numpy).

The cards live beside what they describe: :mod:`ppgbench_pl.encoders.cards` and ``data/datasets.json``.
"""
