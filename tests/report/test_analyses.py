import numpy as np
import pytest

from ppgbench_pl.errors import PPGBenchError
from ppgbench_pl.report.analyses import (
    EPOCH_AXIS,
    aggregation_choices,
    aggregation_frequency,
    edge_choices,
    edge_pressure,
    parameter_table,
    read_parameter_file,
    rescore_jobs,
    rescoring_table,
    search_space,
)
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.results.records import job_id, write_job
from tests.report.fabricate import record, write_run_json


def _job(run, model, task, regime, seed, value, params=None, predictions=None, **details):
    rec = record(model, task, regime, seed, 0, value, 0.5, params=params, **details)
    write_job(run, job_id(model, task, regime, seed, 0), rec, predictions)


def test_aggregation_frequencies(tmp_path):
    for seed, agg in zip((1, 2, 3, 4, 5), ("mean", "mean", "mean", "median", "topk_mean"), strict=True):
        _job(tmp_path, "P", "synthetic-stiffness", "linear", seed, 0.8, {"C": 1.0, "aggregation": agg})
    for seed in (1, 2):
        _job(tmp_path, "Q", "synthetic-stiffness", "mlp", seed, 0.8, {"aggregation": "median"})
    _job(tmp_path, "P", "synthetic-age", "linear", 1, 5.0, {"alpha": 1.0, "aggregation": "mean"})  # no choice
    _job(tmp_path, "P", "synthetic-activity", "linear", 1, 0.8, {"C": 1.0})  # window level
    choices = aggregation_choices(load_runs([tmp_path]).records)
    assert len(choices) == 7 and set(choices["task"]) == {"synthetic-stiffness"}
    freq = aggregation_frequency(choices).set_index(["regime", "model"])
    assert freq.loc[("linear", "P"), ["n_selections", "mean", "median", "topk_mean"]].tolist() == [5, 3, 1, 1]
    assert freq.loc[("linear", "P"), "mean_frac"] == pytest.approx(0.6)
    assert freq.loc[("mlp", "Q"), "median_frac"] == 1.0
    assert freq.loc[("mlp", "all"), "n_selections"] == 2
    assert list(freq.index.get_level_values("regime")) == ["linear", "linear", "mlp", "mlp"]


def _binary(probs_s1, probs_s2):
    p1 = np.array(probs_s1 + probs_s2, float)
    y_prob = np.stack([1 - p1, p1], axis=1)
    return {"y_true": np.array([0] * len(probs_s1) + [1] * len(probs_s2)),
            "subjects": np.array(["s1"] * len(probs_s1) + ["s2"] * len(probs_s2)),
            "y_prob": y_prob, "y_pred": (p1 >= 0.5).astype(int), "classes": np.array([0, 1])}


def test_subject_vs_window_rescoring(tmp_path):
    # s1 (label 0): mean of p1 = 0.516 -> wrong, median 0.3 -> right; windows 3/5 right.
    # s2 (label 1): all right.
    arrays = _binary([0.1, 0.2, 0.3, 0.99, 0.99], [0.9, 0.8, 0.7])
    preds = {"predictions_repeat0.npz": arrays}
    _job(tmp_path, "P", "synthetic-stiffness", "linear", 1, 1.0, {"aggregation": "median"}, preds)
    # R records 1.0 although its mean aggregation scores 0.5: a mismatch the table must count
    _job(tmp_path, "R", "synthetic-stiffness", "linear", 1, 1.0, {"aggregation": "mean"}, preds)
    reg = {"y_true": np.array([50.0, 50.0, 50.0, 30.0, 30.0]), "subjects": np.array(["s1"] * 3 + ["s2"] * 2),
           "y_pred": np.array([40.0, 60.0, 53.0, 30.0, 32.0])}
    _job(tmp_path, "P", "synthetic-age", "linear", 1, 1.0, {"aggregation": "mean"},
         {"predictions_repeat0.npz": reg})
    _job(tmp_path, "P", "synthetic-activity", "linear", 1, 0.7)  # window-level task: not rescored
    jobs = rescore_jobs(load_runs([tmp_path]))
    assert len(jobs) == 3
    table = rescoring_table(jobs).set_index(["task", "model"])
    p = table.loc[("synthetic-stiffness", "P")]
    assert (p["subject_level"], p["window_level"], p["n_mismatched"]) == (1.0, pytest.approx(0.8), 0)
    assert p["window_minus_subject"] == pytest.approx(-0.2)
    r = table.loc[("synthetic-stiffness", "R")]
    assert r["subject_level"] == pytest.approx(0.5) and r["n_mismatched"] == 1
    age = table.loc[("synthetic-age", "P")]
    assert age["subject_level"] == pytest.approx(1.0) and age["window_level"] == pytest.approx(5.0)
    assert list(table.index.get_level_values("task")) == ["synthetic-stiffness", "synthetic-stiffness",
                                                          "synthetic-age"]


def _grid(alphas):
    return [{"params": {"alpha": a, "solver": "auto", "fit_intercept": fi}, "aggregation": "none",
             "mean_score": -1.0, "fold_scores": [-1.0]} for a in alphas for fi in (True, False)]


def _trial(number, lr, batch, epochs, state="COMPLETE"):
    return {"number": number, "state": state, "value": 0.5,
            "params": {"lr": lr, "batch_size": batch, "dropout": 0.0, "aggregation_idx": number % 2},
            "intermediate_values": {str(e): 0.1 * e for e in range(epochs)}, "user_attrs": {}}


def test_edge_pressure_on_crafted_histories(tmp_path):
    for seed, alpha in zip((1, 2, 3, 4), (0.01, 0.01, 1.0, 100.0), strict=True):
        _job(tmp_path, "P", "synthetic-hr", "linear", seed, 3.0,
             {"alpha": alpha, "solver": "auto", "fit_intercept": True}, cv_scores=_grid([0.01, 1.0, 100.0]))
    trials = [_trial(0, 1e-5, 16, 3), _trial(1, 1e-3, 64, 3), _trial(2, 1e-2, 16, 1, "PRUNED")]
    chosen = [{"lr": 1e-2, "batch_size": 16, "dropout": 0.0, "epoch": 2},
              {"lr": 1e-3, "batch_size": 64, "dropout": 0.0, "epoch": 0}]
    for seed, params in zip((1, 2), chosen, strict=True):
        _job(tmp_path, "P", "synthetic-hr", "mlp", seed, 3.0, params, optuna={"trials": trials})
    choices = edge_choices(load_runs([tmp_path]).records)
    pressure = edge_pressure(choices).set_index(["regime", "axis"])
    assert set(pressure.index) == {("linear", "alpha"), ("mlp", "lr"), ("mlp", "batch_size"),
                                   ("mlp", EPOCH_AXIS)}
    alpha = pressure.loc[("linear", "alpha")]
    assert (alpha["n_selections"], alpha["frac_low"], alpha["frac_high"]) == (4, 0.5, 0.25)
    assert (alpha["low"], alpha["high"]) == (0.01, 100.0)
    lr = pressure.loc[("mlp", "lr")]
    assert (lr["at_low"], lr["at_high"]) == (0, 1)
    assert pressure.loc[("mlp", "batch_size"), ["at_low", "at_high"]].tolist() == [1, 1]
    epoch = pressure.loc[("mlp", EPOCH_AXIS)]
    assert (epoch["low"], epoch["high"], epoch["at_low"], epoch["at_high"]) == (0.0, 2.0, 1, 1)
    assert list(pressure.index.get_level_values("axis"))[-1] == EPOCH_AXIS


def test_search_space_reads_list_shaped_intermediate_values():
    result = {"trials": [{"params": {"lr": 0.1}, "intermediate_values": [0.1, 0.2, 0.3, 0.4]},
                         {"params": {"lr": 0.2}, "intermediate_values": [0.1]}]}
    space = search_space(result)
    assert space == {"lr": {0.1, 0.2}, EPOCH_AXIS: {0.0, 1.0, 2.0, 3.0}}


def test_parameter_counts_from_run_json_and_file(tmp_path):
    run = tmp_path / "run"
    _job(run, "P", "synthetic-hr", "linear", 1, 3.0)
    _job(run, "Q", "synthetic-hr", "linear", 1, 3.0)
    write_run_json(run, [], {"P": {"total": 1000, "trainable": 900}, "prv_neurokit2": 0})
    runs = load_runs([run])
    assert runs.parameters == {"P": {"total": 1000, "trainable": 900}, "prv_neurokit2": {"total": 0}}
    csv = tmp_path / "params.csv"
    csv.write_text("model,total,trainable\nQ,5000000,5000000\n")
    counts = {**runs.parameters, **read_parameter_file(csv)}
    table = parameter_table(counts, runs.models)
    assert table.to_dict("records") == [{"model": "P", "total": 1000, "trainable": 900},
                                        {"model": "Q", "total": 5000000, "trainable": 5000000}]
    bad = tmp_path / "bad.csv"
    bad.write_text("name,size\nQ,1\n")
    with pytest.raises(PPGBenchError, match="expected columns 'model' and 'total'"):
        read_parameter_file(bad)
