"""The thread policy: one thread for probe jobs, the cores for encoder passes, an override, all recorded apart
from the run identity, and records identical whatever the policy."""

from __future__ import annotations

import json

import pytest
import torch
from torch import Tensor

from ppgbench_pl.benchmark.executors import LocalExecutor, ProcessExecutor, fork_refusal
from ppgbench_pl.benchmark.thread_policy import ENV, choose_policy, thread_override, usable_cores
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.probes.threads import current_blas_threads, intra_op_threads
from ppgbench_pl.regimes.base import JobContext, RepeatOutcome
from ppgbench_pl.regimes.linear import LinearRegime
from tests.benchmark.helpers import run, same_results, search_records, suite_config, write_config

SEEN: dict[str, list[int]] = {"probe": [], "blas": [], "encoder": []}


class SeenLinear(LinearRegime):
    """The linear probe, noting the torch and BLAS threads its job runs with (in this process)."""

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        SEEN["probe"].append(torch.get_num_threads())
        SEEN["blas"].extend(current_blas_threads())
        return super().run(ctx)


class SeenCNN(SmallCNNEncoder):
    """The small CNN, noting the torch threads of its forward passes (the embedding pass)."""

    name = "seen_cnn"

    def forward(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        SEEN["encoder"].append(torch.get_num_threads())
        return super().forward(x, ppg_mean, ppg_std)


MLP = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
       "init_args": {"stack_jobs": 2, "subject_repeats": 1,
                     "search": {"n_trials": 2, "n_startup_trials": 1, "max_epochs": 2},
                     "search_space": {"batch_size": [128], "dropout": [0.0, 0.3]}}}
SEEN_LINEAR = {"class_path": f"{__name__}.SeenLinear"}
SEEN_CNN = {"class_path": f"{__name__}.SeenCNN"}


def test_the_override_comes_from_the_flag_then_the_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert thread_override(None) == (None, "default")
    monkeypatch.setenv(ENV, "3")
    assert thread_override(None) == (3, ENV)
    assert thread_override(2) == (2, "--threads")  # the flag wins
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(ConfigError, match=f"{ENV}="):
            thread_override(None)
    with pytest.raises(ConfigError, match="--threads must be at least 1, got 0"):
        thread_override(0)


def test_probe_jobs_get_one_thread_and_encoder_work_the_executors_share(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    local = choose_policy(LocalExecutor(workers=1))  # every job in this process: finetuning keeps its threads
    assert (local.probe, local.encoder, local.embedding_pass) == (1, torch.get_num_threads(), torch.get_num_threads())
    if fork_refusal() is None:  # two forked job processes, one thread each
        forked = choose_policy(LocalExecutor(workers=2))
        assert (forked.encoder, forked.processes) == (1, 2)
    assert local.for_job(uses_embeddings=True) == 1 and local.for_job(uses_embeddings=False) == local.encoder
    assert "--threads N" in local.line() and "\n" not in local.line()
    pool = choose_policy(ProcessExecutor(workers=2))
    assert (pool.probe, pool.encoder, pool.processes) == (1, max(1, usable_cores() // 2), 2)
    assert ProcessExecutor().workers == usable_cores()  # sized to the cores by default
    assert ProcessExecutor(gpus=[0, 1, 2]).workers == 3  # one worker per GPU
    forced = choose_policy(LocalExecutor(), 3)
    assert (forced.probe, forced.encoder, forced.embedding_pass, forced.source) == (3, 3, 3, "--threads")
    assert json.loads(json.dumps(forced.record()))["source"] == "--threads"


def test_intra_op_threads_sets_torch_and_blas_then_restores_them():
    import numpy as np

    np.dot(np.ones((4, 4)), np.ones((4, 4)))  # BLAS loaded
    torch.set_num_threads(2)
    blas_before = current_blas_threads()
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
        assert set(current_blas_threads()) == {1}
    assert torch.get_num_threads() == 2 and current_blas_threads() == blas_before
    with intra_op_threads(None):
        assert torch.get_num_threads() == 2


def _run(tmp_path, bench_root, name, args, env=None, monkeypatch=None):
    out = tmp_path / name
    config = suite_config(bench_root, out, encoders=[SEEN_CNN], regimes=[SEEN_LINEAR, MLP], tasks=["synthetic-hr"],
                          folds=[0], data={"synthetic_windows": 40}, cache_dir=str(tmp_path / f"cache-{name}"))  # each policy computes its own embeddings
    for key in SEEN:
        SEEN[key].clear()
    args = ["--progress", "true", *args]  # the policy's line comes with the progress lines
    assert run(["--config", str(write_config(tmp_path / f"{name}.yaml", config)), *args], "fit") == 0
    return out, {k: list(v) for k, v in SEEN.items()}


def test_the_policy_runs_is_recorded_and_changes_no_record(tmp_path, bench_root, monkeypatch, capsys):
    monkeypatch.delenv(ENV, raising=False)
    torch.set_num_threads(2)
    default, seen = _run(tmp_path, bench_root, "default", [])
    assert set(seen["probe"]) == {1} and set(seen["blas"]) == {1} and set(seen["encoder"]) == {2}
    assert torch.get_num_threads() == 2  # the caller's setting is back
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("threads:")]
    assert len(said) == 1 and "probe jobs 1 per process" in said[0]

    forced, seen = _run(tmp_path, bench_root, "forced", ["--threads", "2"])
    assert set(seen["probe"]) == {2} and set(seen["encoder"]) == {2}
    monkeypatch.setenv(ENV, "1")
    env, seen = _run(tmp_path, bench_root, "env", [])
    assert set(seen["probe"]) == {1} and set(seen["encoder"]) == {1}
    assert "(PPGBENCH_THREADS)" in capsys.readouterr().err

    meta = {name: json.loads((folder / "run.json").read_text()) for name, folder in
            (("default", default), ("forced", forced), ("env", env))}
    assert [meta[n]["threads"]["source"] for n in meta] == ["default", "--threads", ENV]
    assert meta["forced"]["threads"]["probe"] == 2 and meta["env"]["threads"]["embedding_pass"] == 1
    assert meta["default"]["identity"] == meta["forced"]["identity"] == meta["env"]["identity"]
    got = {name: search_records(folder) for name, folder in (("default", default), ("forced", forced), ("env", env))}
    assert len(got["default"]) == 2 and all(r["status"] == "ok" for r in got["default"].values())
    # 400 windows: the heads' products and sums (128 x 512 and more) are above torch's grain size, so two
    # threads split them; the numbers then agree to float32 roundoff (same_results: relative 1e-6)
    assert same_results(got["default"], got["forced"]) == [] and same_results(got["default"], got["env"]) == []

    # a rerun into the folder under another policy is the same run: accepted, and its policy recorded
    monkeypatch.delenv(ENV)
    config = tmp_path / "default.yaml"
    assert run(["--config", str(config), "--threads", "1"], "fit") == 0
    assert json.loads((default / "run.json").read_text())["threads"]["source"] == "--threads"


def test_a_bad_override_is_refused_in_one_line_before_anything_is_written(tmp_path, bench_root, monkeypatch, capsys):
    config = write_config(tmp_path / "c.yaml", suite_config(bench_root, tmp_path / "run", tasks=["synthetic-hr"]))
    monkeypatch.delenv(ENV, raising=False)
    for args in (["--threads", "0"], ["--threads", "0", "--dry-run"]):
        assert run(["--config", str(config), *args], "fit") == 2
        assert "--threads must be at least 1, got 0" in capsys.readouterr().err
    monkeypatch.setenv(ENV, "many")
    assert run(["--config", str(config)], "fit") == 2
    assert f"{ENV}='many'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_evaluate_takes_threads_as_the_command_line_does(tmp_path, bench_root, monkeypatch):
    from ppgbench_pl.api import evaluate

    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(ConfigError, match="--threads must be at least 1, got 0"):
        evaluate("small_cnn", dataset="synthetic", threads=0, dry_run=True, output_dir=str(tmp_path / "run"),
                 root=str(bench_root), synthetic_subjects=10, synthetic_windows=4)
