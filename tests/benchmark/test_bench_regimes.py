"""tools/bench_regimes.py compares every record of two runs apart from timing, and judges issue 33's targets."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_regimes", ROOT / "tools/bench_regimes.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_regimes", tool)
    spec.loader.exec_module(tool)
    return tool


def _folder(base: Path, mae: float, seconds: float, budget: str = "published", regime: str = "linear") -> Path:
    for fold in (0, 1):
        job = base / "jobs" / f"m__t__{regime}__seed42__fold{fold}"
        job.mkdir(parents=True)
        record = {"job_id": job.name, "regime": regime, "budget": budget,
                  "results": [{"mae": mae + fold, "trials": [{"seconds": seconds}]}],
                  "seconds": seconds, "cpu_seconds": seconds, "worker": f"host:{seconds}",
                  "code_version": {"source_sha256": str(seconds)}}
        (job / "results.json").write_text(json.dumps(record))
    return base


def test_records_differ_only_in_what_they_computed(monkeypatch, tmp_path):
    tool = _tool(monkeypatch)
    base = tool.records(_folder(tmp_path / "a", 2.5, 1.0))
    assert tool.record_differences(base, tool.records(_folder(tmp_path / "b", 2.5, 7.0))) == ([], 0.0)  # timing
    problems, largest = tool.record_differences(base, tool.records(_folder(tmp_path / "c", 2.5 + 1e-8, 1.0)))
    assert problems == [] and 0 < largest < 1e-8  # float32 roundoff of another thread count
    problems, _ = tool.record_differences(base, tool.records(_folder(tmp_path / "d", 2.6, 1.0)))
    assert problems == ["m__t__linear__seed42__fold0: results", "m__t__linear__seed42__fold1: results"]


def test_a_field_relabelled_on_purpose_is_named_not_counted(monkeypatch, tmp_path):
    tool = _tool(monkeypatch)
    base = tool.records(_folder(tmp_path / "a", 2.5, 1.0, regime="mlp"))
    said: set[str] = set()
    relabelled = tool.records(_folder(tmp_path / "b", 2.5, 1.0, "custom", regime="mlp"))
    assert tool.record_differences(base, relabelled, said) == ([], 0.0)
    assert said == {"budget: published -> custom (4601706: a regime's own cut search is labelled custom, "
                    "not published)"}
    problems, _ = tool.record_differences(base, tool.records(_folder(tmp_path / "c", 2.5, 1.0, "smoke", regime="mlp")))
    assert problems == ["m__t__mlp__seed42__fold0: budget", "m__t__mlp__seed42__fold1: budget"]  # not listed
    linear = tool.records(_folder(tmp_path / "d", 2.5, 1.0))  # no search to cut: a custom label is a difference
    problems, _ = tool.record_differences(linear, tool.records(_folder(tmp_path / "e", 2.5, 1.0, "custom")))
    assert problems == ["m__t__linear__seed42__fold0: budget", "m__t__linear__seed42__fold1: budget"]


def test_the_full_run_judges_the_issue_targets(monkeypatch, capsys):
    tool = _tool(monkeypatch)
    cpu = {"base": [100.0], "now": [45.0]}
    wall = {"base": [56.0], "now": [50.0]}
    assert not tool.report("mlp", ["base", "now"], cpu, wall, {}, full=True, pairs=1)  # wall x1.12 < x1.2
    out = capsys.readouterr().out
    assert "cpu: x2.22 >= x2: PASS" in out and "wall: x1.12 >= x1.2: FAIL" in out
    assert tool.report("mlp", ["base", "now"], cpu, {"base": [56.0], "now": [46.0]}, {}, full=True, pairs=1)
    assert not tool.report("linear", ["base", "now"], {"base": [7.5], "now": [6.0]}, wall, {}, full=True, pairs=1)
    assert not tool.report("rf", ["base", "now"], cpu, wall, {"now": (["job ids differ"], 0.0)}, full=False, pairs=1)
