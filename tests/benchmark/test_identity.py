"""A run folder refuses results of another config, data or code, and accepts an extended plan."""

from __future__ import annotations

import json
import shutil

from ppgbench_pl.benchmark.identity import merge_identity, source_digest
from tests.benchmark.helpers import HALF, LINEAR, run, suite_config, write_config


def test_identity_refuses_changes_and_merges_extensions(tmp_path, bench_root, reference, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(reference["run_dir"], run_dir)

    def attempt(name: str, **overrides) -> int:
        return run(["--config", str(write_config(tmp_path / f"{name}.yaml", suite_config(bench_root, run_dir,
                                                                                        **overrides)))])

    changed_regime = {"class_path": "ppgbench_pl.regimes.LinearRegime",
                      "init_args": {"binary_metric": "balanced_accuracy"}}
    for name, overrides in {
        "regime": {"regimes": [changed_regime, HALF]},
        "data": {"data": {"synthetic_seed": 1}},
        "encoder": {"encoders": [{"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder",
                                  "init_args": {"seed": 1}}]},
    }.items():
        capsys.readouterr()
        assert attempt(name, **overrides) == 2, name
        err = capsys.readouterr().err
        assert "different config or data" in err and len(err.strip().splitlines()) == 1, err
    # Untouched by the refused attempts; then extended by more seeds and another dataset rate.
    assert len(list(run_dir.glob("jobs/*/results.json"))) == len(reference["records"])
    assert attempt("more", seeds=[42, 43], regimes=[LINEAR]) == 0
    meta = json.loads((run_dir / "run.json").read_text())
    assert len(meta["planned_jobs"]) == len(reference["records"]) + 4
    assert set(meta["identity"]["regimes"]) == {"linear", "linear_frac50"}
    assert meta["config"]["data"]["init_args"]["seeds"] == [42, 43] and meta["versions"]["torch"]
    assert meta["seeds"] == [42, 43]
    assert meta["parameters"]["small_cnn"]["total"] > 0


def test_merge_identity_adds_new_entries_and_reports_conflicts():
    old = {"source_sha256": "a", "encoders": {"m": {"w": "1"}},
           "datasets": {"d": {"n_folds": 5, "data": {"64": "h"}}}, "regimes": {"linear": {}}}
    new = {"source_sha256": "a", "encoders": {"m": {"w": "1"}, "n": {"w": "2"}},
           "datasets": {"d": {"n_folds": 5, "data": {"64": "h", "125": "g"}}, "e": {"n_folds": 5, "data": {}}},
           "regimes": {"rf": {}}}
    merged, conflicts = merge_identity(old, new)
    assert conflicts == []
    assert set(merged["encoders"]) == {"m", "n"} and set(merged["regimes"]) == {"linear", "rf"}
    assert merged["datasets"]["d"]["data"] == {"64": "h", "125": "g"} and "e" in merged["datasets"]
    bad = {**new, "source_sha256": "b", "encoders": {"m": {"w": "9"}},
           "datasets": {"d": {"n_folds": 5, "data": {"64": "x"}}}}
    assert merge_identity(old, bad)[1] == ["datasets.d", "encoders.m", "source_sha256"]


def test_source_digest_is_a_sha256_of_the_package():
    digest = source_digest()  # imported before conftest pins it for the other tests
    assert len(digest) == 64 and int(digest, 16) >= 0
