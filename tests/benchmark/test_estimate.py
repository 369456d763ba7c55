"""Cost before compute (issue 20 point 1): calibration, the estimate as rate x units, and what the dry run prints."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from ppgbench_pl.benchmark.calibrate import TINY, calibrate
from ppgbench_pl.benchmark.cost_model import (
    RATES,
    CostModel,
    calibration_path,
    hyperband_epochs,
    load_model,
    machine_description,
    save_model,
)
from ppgbench_pl.benchmark.estimate import THREAD_FACTOR, estimate_plan, wall_seconds
from ppgbench_pl.benchmark.executors import fork_refusal
from ppgbench_pl.benchmark.thread_policy import usable_cores
from ppgbench_pl.regimes.search_seeds import searches_per_job
from tests.benchmark.helpers import LINEAR, suite_config, suite_of, tree, write_config
from tests.cli_helpers import run_cli

MLP = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
       "init_args": {"search": {"n_trials": 4, "n_startup_trials": 1, "max_epochs": 3}, "subject_repeats": 1}}
LOCAL = {"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor"}


@pytest.fixture(autouse=True)
def own_calibration(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's calibrations in a folder of its own (never the user's)."""
    folder = tmp_path_factory.mktemp("calibration")
    monkeypatch.setenv("PPGBENCH_CALIBRATION_DIR", str(folder))
    return folder


def test_calibrate_on_a_tiny_setting_measures_and_is_stored_per_machine(own_calibration, capsys):
    model = calibrate(setting=TINY)
    assert model.calibrated and model.device == "cpu" and model.seconds > 0
    assert set(model.rates) == set(TINY.kinds) and all(model.rates[kind] > 0 for kind in TINY.kinds)
    (cnn,) = model.encoders.values()
    assert cnn["name"] == "small_cnn" and cnn["embed_dim"] == 64 and cnn["training"] == "measured"
    assert cnn["inference_per_s"] > 0 and cnn["training_per_s"] > 0
    path = save_model(model)
    assert path == calibration_path() and path.parent == own_calibration
    loaded = load_model()
    assert loaded.calibrated and loaded.rates == model.rates and loaded.created
    code, out, err = run_cli(["calibrate", "--show"], capsys)
    assert code == 0 and str(path) in out and "ridge" in out and "small_cnn" in out, err
    assert f"rf        {RATES['rf']:.3g} s per unit (default: not measured)" in out  # TINY: ridge and mlp only


def test_an_unreadable_calibration_is_one_line_naming_it(own_calibration, capsys):
    calibration_path().parent.mkdir(parents=True, exist_ok=True)
    calibration_path().write_text("{broken")
    code, _, err = run_cli(["calibrate", "--show"], capsys)
    assert code == 2 and str(calibration_path()) in err and "ppgbench calibrate --force" in err
    assert len(err.strip().splitlines()) == 1


def test_hyperband_epochs_are_between_one_and_the_budget_and_grow_with_it():
    assert hyperband_epochs(1) == 1.0
    means = [hyperband_epochs(e) for e in (3, 9, 25, 81)]
    assert all(1 < m < e for m, e in zip(means, (3, 9, 25, 81), strict=True))
    assert means == sorted(means)


def test_search_repeats_reads_the_regime_and_defaults_to_one():
    assert searches_per_job(SimpleNamespace()) == 1
    assert searches_per_job(SimpleNamespace(search_seeds=[0, 1, 2])) == 3


def _estimate(engine_root: Path, tmp_path: Path, subjects: int, model: CostModel, seeds: object = None,
              executor: dict = LOCAL):
    config = suite_config(engine_root, tmp_path / f"run{subjects}", regimes=[LINEAR, MLP], tasks=["synthetic-hr"],
                          data={"synthetic_subjects": subjects, "synthetic_windows": 10})
    config["data"]["init_args"].update(seeds=[42], folds=[0, 1])
    config["trainer"] = {"accelerator": "cpu", "devices": 1, "callbacks": config["trainer"]["callbacks"]}
    suite = suite_of(config)
    plan = suite.plan(dry=True)
    for job in plan:
        if seeds is not None and job.regime.name == "mlp":
            job.regime.search_seeds = seeds
    est = estimate_plan(suite, plan, executor, model, read_tree=False)
    return {name: sum(j.seconds for j in est.jobs if j.regime == name) for name in ("linear", "mlp")}, est


def test_the_estimate_is_each_jobs_rate_times_its_units(engine_root, tmp_path):
    model = CostModel("test", calibrated=True, rates={"ridge": 0.01, "mlp": 0.002}, startup_s=3.0)
    costs, est = _estimate(engine_root, tmp_path, 10, model)
    n, d = 10 * 10 * 4 / 5, 64  # 10 subjects x 10 windows, the outer training part of 5 folds; the CNN's 64-d
    ridge = 0.01 * 5 * (1 + n * d * d / 8e8)  # 4 inner folds and the refit; the scales docs/performance.md states
    trial_epochs = 4 * hyperband_epochs(3, 1, 3, 4)  # 4 trials of at most 3 epochs, one holdout
    mlp = 0.002 * trial_epochs * (1 + n * (1 + d / 64) / 2 / 3000.0)
    assert costs["linear"] == pytest.approx(2 * ridge) and costs["mlp"] == pytest.approx(2 * mlp)  # 2 folds each
    assert [j.trials for j in est.jobs if j.regime == "mlp"] == [4, 4]
    forks = fork_refusal() is None
    assert len(est.jobs) == 4 and est.embedding_passes == 1 and est.processes == 1  # a fork starts nothing
    assert est.slots == (usable_cores() if forks else 1)  # the local executor: one job process per core
    _, here = _estimate(engine_root, tmp_path, 10, model, executor={**LOCAL, "init_args": {"workers": 1}})
    assert here.slots == 1 and wall_seconds(here) == pytest.approx(3.0 + 0.25 + 2 * ridge + 2 * mlp)
    if forks and (os.cpu_count() or 1) >= 2:  # the 2 MLP jobs side by side, the linear ones in the command's
        _, two = _estimate(engine_root, tmp_path, 10, model, executor={**LOCAL, "init_args": {"workers": 2}})
        assert two.slots == 2 and wall_seconds(two) == pytest.approx(3.0 + 0.25 + 2 * ridge + mlp)
    assert est.embedding_seconds == pytest.approx(100 / 400)  # every window, at the default 400 windows/s
    assert any("synthetic at 64 Hz: the synthetic settings" in a for a in est.assumptions)
    repeated, _ = _estimate(engine_root, tmp_path, 10, model, seeds=[0, 1, 2])
    assert repeated["linear"] == costs["linear"]
    assert repeated["mlp"] == pytest.approx(3 * costs["mlp"])


def _dry_config(engine_root: Path, tmp_path: Path, **run: object) -> Path:
    config = suite_config(engine_root, tmp_path / "run", regimes=[LINEAR, MLP], tasks=["synthetic-hr"],
                          data={"synthetic_windows": 4}, **run)
    return write_config(tmp_path / "config.yaml", config)


def test_the_dry_run_prints_regimes_totals_and_says_when_it_is_uncalibrated(engine_root, tmp_path, capsys):
    path = _dry_config(engine_root, tmp_path)
    code, out, err = run_cli(["fit", "--config", str(path), "--dry-run"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    uncalibrated = [line for line in lines if "UNCALIBRATED" in line]
    assert len(uncalibrated) == 1 and str(calibration_path()) in uncalibrated[0] and "ppgbench calibrate" in out
    table = lines[lines.index(uncalibrated[0]) + 1:]
    assert table[0].split() == ["regime", "jobs", "per", "job", "CPU", "GPU"]
    assert [row.split()[0] for row in table[1:5]] == ["linear", "mlp", "start-up", "embedding"]
    assert table[5].split()[:2] == ["total", "4"]  # 1 seed x 2 folds x 2 regimes
    slots = usable_cores() if fork_refusal() is None else 1
    assert f"wall time with the local executor ({slots} job(s) at once" in out
    assert "assumes sizes: synthetic at 64 Hz: processed tree" in out and "uncalibrated defaults" in out
    assert not (tmp_path / "run").exists()

    save_model(CostModel(machine_description(), calibrated=True, created="2026-12-01T00:00:00+00:00"))
    code, out, err = run_cli(["fit", "--config", str(path), "--dry-run", "--executor", "process"], capsys)
    assert code == 0, err
    assert "UNCALIBRATED" not in out and "estimate for this machine" in out and "calibrated 2026-12-01" in out

    # the pool's default size: one worker per core
    assert f"wall time with the process executor ({usable_cores()} job(s) at once" in out


def test_without_the_tree_the_dry_run_assumes_published_sizes_under_the_budget_caps(tmp_path, capsys):
    config = suite_config(tmp_path / "empty", tmp_path / "run", regimes=[LINEAR], tasks=["dalia-hr"],
                          data={"dataset": "dalia", "synthetic_subjects": 30})
    path = write_config(tmp_path / "config.yaml", config)
    smoke = str(Path(__file__).resolve().parents[2] / "configs" / "budget" / "smoke.yaml")
    code, out, err = run_cli(["fit", "--config", str(path), "--dry-run"], capsys)
    assert code == 0, err
    assert "data not readable" in out and "dalia at 64 Hz: assumed: no processed tree" in out
    assert "dalia-hr 64500" in out  # 15 published subjects x ~4,300 windows
    code, out, err = run_cli(["fit", "--config", str(path), "--config", smoke, "--dry-run"], capsys)
    assert code == 0, err
    assert "dalia-hr 320" in out  # at most 10 subjects x 32 windows


def test_the_api_dry_run_prints_the_estimate_and_writes_nothing(engine_root, tmp_path, capsys):
    import ppgbench_pl as pb

    out = tmp_path / "api"
    result = pb.evaluate("small_cnn", dataset="synthetic", tasks=["synthetic-hr"], regimes=["linear"], controls=(),
                         seeds=[42], folds=[0], output_dir=out, root=str(engine_root), synthetic_subjects=10,
                         synthetic_windows=4, wandb="off", dry_run=True)
    printed = capsys.readouterr().out
    assert result is None and "1 jobs planned" in printed and "UNCALIBRATED" in printed and "total" in printed
    assert tree(out) == {}


def test_searched_jobs_at_several_threads_cost_the_thread_factor_more(engine_root, tmp_path, monkeypatch):
    model = CostModel("test", calibrated=True)
    monkeypatch.delenv("PPGBENCH_THREADS", raising=False)  # the policy: an MLP probe job runs at one thread
    one, est = _estimate(engine_root, tmp_path, 10, model)
    monkeypatch.setenv("PPGBENCH_THREADS", "2")  # overridden: two threads for every job
    two, est2 = _estimate(engine_root, tmp_path, 10, model)
    assert est.threads == 1 and est2.threads == 2 and two["linear"] == one["linear"]
    assert two["mlp"] == pytest.approx(THREAD_FACTOR * one["mlp"])
    assert any("2 torch thread(s) each: 14x" in a and "PPGBENCH_THREADS" in a for a in est2.assumptions)
