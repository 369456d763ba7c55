"""A feature control's windows without features are counted in every record.

PRV features of a window without usable beats are zeros, as published (PROTOCOL.md 5.2); before, nothing
said how many of a fold's windows that was, so a control that failed on most windows looked like one that
measured zeros.
"""

from __future__ import annotations

import numpy as np

from ppgbench_pl.benchmark.job import _prelude
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from tests.regimes.neural_helpers import context, datamodule


def test_windows_without_features_are_counted_for_feature_controls(tmp_path):
    dm = datamodule(tmp_path / "data")
    prv = PublishedPRVEncoder(n_jobs=1)
    ctx = context(dm, prv, "synthetic-hr", tmp_path / "job", embeddings=None)
    rows = int(ctx.view.rows.max()) + 1  # the cache holds every window of the dataset; the view indexes it
    features = np.ones((rows, prv.embed_dim), dtype=np.float32)
    train, test = ctx.outer()
    used = ctx.view.rows[np.concatenate([train, test])]
    features[used[::3]] = 0.0  # every third window of the fold: no beats found
    ctx.embeddings = features
    record: dict = {}
    _prelude(ctx, record)
    assert record["windows_without_features"] == {"n": len(used[::3]), "of": len(used)}

    cnn_ctx = context(dm, SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "cnn", embeddings=features)
    record = {}
    _prelude(cnn_ctx, record)
    assert "windows_without_features" not in record  # a network's zero row is not a failed window
