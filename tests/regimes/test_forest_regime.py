import json

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.benchmark.runner import ProtocolRunner
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.prv import PublishedPRVEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.metrics.aggregation import candidates
from ppgbench_pl.probes import backends
from ppgbench_pl.regimes.forest import RandomForestRegime

TASKS = ["synthetic-hr", "synthetic-activity", "synthetic-stiffness"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One RF run (seed 42, folds 0-1) of the published PRV control on three synthetic tasks."""
    tmp = tmp_path_factory.mktemp("rf")
    dm = PPGDataModule(dataset="synthetic", root=str(tmp / "data"), tasks=TASKS, seeds=[42], folds=[0, 1],
                       synthetic_subjects=12, synthetic_windows=8)
    regime = RandomForestRegime(backend="sklearn", n_jobs=1, n_estimators=[15], max_depth=[2, 6])
    report = ProtocolRunner(tmp / "run", dm, [PublishedPRVEncoder(n_jobs=1)], [regime], progress=False).run()
    assert report.failed == [] and report.completed == 6
    return tmp / "run"


def _records(run_dir, task):
    paths = sorted((run_dir / "jobs").glob(f"*__{task}__rf__seed42__fold*/results.json"))
    assert len(paths) == 2
    return [json.loads(p.read_text()) for p in paths]


def test_records_carry_backend_and_grid_choice(run_dir):
    for task in TASKS:
        for record in _records(run_dir, task):
            assert record["status"] == "ok" and record["backend"] == "sklearn"
            result = record["results"][0]
            assert result["forest_backend"] == "sklearn"
            assert result["params"]["n_estimators"] == 15 and result["params"]["max_depth"] in (2, 6)
            assert len(result["cv_scores"]) == 2 * (3 if task == "synthetic-stiffness" else 1)


def test_regression_beats_constant_baseline(run_dir):
    for record in _records(run_dir, "synthetic-hr"):
        mae, baseline = record["results"][0]["metrics"]["mae"], record["baseline"]["mae"]
        assert mae < 0.6 * baseline


def test_multiclass_predictions(run_dir):
    for record in _records(run_dir, "synthetic-activity"):
        job = run_dir / "jobs" / record["job_id"]
        arrays = np.load(job / "predictions_repeat0.npz")
        assert arrays["y_prob"].shape == (len(arrays["y_true"]), len(arrays["classes"]))
        np.testing.assert_allclose(arrays["y_prob"].sum(axis=1), 1.0)
        assert record["results"][0]["metrics"]["balanced_accuracy"] is not None


def test_subject_level_binary_records_aggregation(run_dir):
    for record in _records(run_dir, "synthetic-stiffness"):
        result = record["results"][0]
        assert result["params"]["aggregation"] in candidates("classification")
        assert result["metrics"]["n_subjects"] == len(record["test_groups"])


def test_summary_has_rf_rows(run_dir):
    summary = pd.read_csv(run_dir / "summary.csv")
    rows = summary[(summary.model == "prv_published") & (summary.regime == "rf")]
    assert sorted(rows.task) == sorted(TASKS) and (rows.n_folds == 2).all()


def test_settings_identity_and_config_errors(monkeypatch):
    regime = RandomForestRegime(backend="sklearn", n_jobs=4, max_depth=[3])
    settings = regime.settings()
    assert "n_jobs" not in settings and settings["resolved_backend"] == "sklearn"
    assert settings["max_depth"] == (3,) and regime.backend() == "sklearn" and regime.name == "rf"
    monkeypatch.setattr(backends, "cuml_usable", lambda: False)
    assert RandomForestRegime().backend() == "sklearn"
    with pytest.raises(ConfigError, match="cuml"):
        RandomForestRegime(backend="cuml")
    with pytest.raises(ConfigError, match="max_depth"):
        RandomForestRegime(backend="sklearn", max_depth=[])
