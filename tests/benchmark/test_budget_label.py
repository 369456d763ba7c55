"""``budget`` in a record and a summary row is what ran (issue 32 point 6): ``published`` only when every
setting of the published budget holds."""

from __future__ import annotations

import json

import pandas as pd

import ppgbench_pl as pb
from ppgbench_pl.benchmark.budget import budget_label


def test_budget_label_rules():
    assert budget_label(None, []) == "published"
    assert budget_label("published", ["refit=True", "callback=x.Y"]) == "published"  # deviations, not budget
    assert budget_label("published", ["search.n_trials=4"]) == "custom"
    assert budget_label("published", ["subject_repeats=1"]) == "custom"
    assert budget_label("smoke", ["search.n_trials=4"]) == "smoke"


def test_a_search_cut_in_the_regime_settings_is_labelled_custom(tmp_path):
    small = {"search": {"n_trials": 2, "n_startup_trials": 1, "max_epochs": 2}, "subject_repeats": 1}
    res = pb.evaluate("small_cnn", dataset="synthetic", tasks=["synthetic-hr"], regimes=(("mlp", small), "linear"),
                      controls=(), seeds=[42], folds=[0], output_dir=tmp_path / "run", root=str(tmp_path / "data"),
                      synthetic_subjects=8, synthetic_windows=4, accelerator="cpu", progress=False, wandb="off")
    records = [json.loads(p.read_text()) for p in (tmp_path / "run/jobs").glob("*/results.json")]
    budgets = {r["regime"]: r["budget"] for r in records}
    assert budgets == {"mlp": "custom", "linear": "published"}
    summary = pd.read_csv(tmp_path / "run/summary.csv")
    assert dict(zip(summary["regime"], summary["budget"], strict=True)) == {"mlp": "custom", "linear": "published"}
    assert res is not None
