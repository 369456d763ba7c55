"""Model and dataset cards: what each encoder was pretrained on, what each dataset is, and how to cite both.

The cards are plain data (no numpy, pandas or torch), so ``ppgbench list`` and ``ppgbench cite`` stay
fast. :mod:`.types` holds the record types, :mod:`.vocabulary` the shared names of the source databases a
pretraining list and a dataset's provenance are written in, :mod:`.overlap` the rule that turns the two
into a ``pretraining_overlap`` flag, and :mod:`.bibtex` the citations. The cards themselves live next to
what they describe: model cards in :mod:`ppgbench_pl.encoders.cards` (beside the encoder catalog), dataset
cards as ``CARD`` in each ``ppgbench_pl/data/datasets/<key>_info.py`` (beside its declaration).
"""
