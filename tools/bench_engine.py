"""Whole-process cost of a protocol run, this checkout against an earlier commit, side by side.

Runs the same linear-regime `fit` in child processes of the current source and of a baseline
checkout (a git worktree of ``--baseline-ref``, default the first landing), alternating, and prints
CPU seconds (user + system of the child, from ``getrusage``) and wall seconds, medians over
``--repeats``, with their ratios. CPU seconds are the figure to quote on a 2-vCPU machine: threads
give unreliable wall-clock gains there.

Scenarios:
  linear3000  linear regime, small CNN (64-d), 3,000 synthetic windows (150 subjects x 20), 1 seed x 5 folds
  quickstart  configs/quickstart.yaml of each version with the same controls (the published PRV), 200 jobs;
              "inside jobs" sums the records' CPU seconds (wall seconds for a version without them)

  python tools/bench_engine.py                       # both scenarios, 3 repeats
  python tools/bench_engine.py --scenario linear3000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_LANDING = "223bccd"
#: Issue 14's targets: (scenario, measure) -> least ratio baseline / now.
TARGETS = {("linear3000", "cpu"): 2.0, ("quickstart", "jobs"): 3.0}

LINEAR = """
seed_everything: 42
model:
  class_path: ppgbench_pl.tasks.EncoderTask
  init_args:
    encoder: {{class_path: ppgbench_pl.encoders.cnn.SmallCNNEncoder}}
controls: []
data:
  class_path: ppgbench_pl.datamodules.PPGDataModule
  init_args:
    dataset: synthetic
    root: {root}
    seeds: [42]
    folds: [0, 1, 2, 3, 4]
    synthetic_subjects: 150
    synthetic_windows: 20
trainer:
  accelerator: cpu
  devices: 1
  callbacks:
    - class_path: ppgbench_pl.regimes.LinearRegime
"""


def run_child(source: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``ppgbench`` run of ``source``."""
    code = "import sys; from ppgbench_pl.cli import main; sys.argv = ['ppgbench', *sys.argv[1:]]; main()"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=source, env={**env, "PYTHONPATH": str(source)},
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{source}: ppgbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def job_seconds(run_dir: Path) -> float:
    """Sum over a run folder's records of the CPU seconds inside jobs (records of versions that did not
    record ``cpu_seconds`` give their wall ``seconds``; jobs run in one process, so the two are close)."""
    total = 0.0
    for path in run_dir.glob("jobs/*/results.json"):
        record = json.loads(path.read_text())
        total += record.get("cpu_seconds", record.get("seconds", 0.0))
    return total


def summary_means(run_dir: Path) -> dict[tuple[str, str, str, str], float]:
    """``summary.csv`` means by (model, task, regime, metric)."""
    import csv

    with (run_dir / "summary.csv").open() as handle:
        return {(r["model"], r["task"], r["regime"], r["metric"]): float(r["mean"]) for r in csv.DictReader(handle)}


def compare_summaries(base: Path, new: Path, tolerance: float) -> str:
    """One line: how many summary means both versions wrote, and whether they agree within ``tolerance``."""
    a, b = summary_means(base), summary_means(new)
    common = sorted(set(a) & set(b))
    if not common:
        return "  equality: FAIL (no summary row in common)"
    worst = max(abs(a[k] - b[k]) for k in common)
    verdict = "PASS" if worst <= tolerance else "FAIL"
    return (f"  equality: {len(common)} summary means in both (of {len(a)} / {len(b)}), "
            f"largest difference {worst:.2e} (tolerance {tolerance:g}): {verdict}")


def baseline_checkout(ref: str, where: Path) -> Path:
    """A worktree of ``ref`` (created once)."""
    if not (where / "ppgbench_pl").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(where), ref], cwd=ROOT, check=True,
                       capture_output=True)
    return where


def scenario_args(name: str, work: Path, tag: str) -> tuple[list[str], Path]:
    out = work / f"{name}-{tag}-{time.monotonic_ns()}"
    if name == "linear3000":
        config = work / f"linear3000-{tag}.yaml"
        config.write_text(LINEAR.format(root=work / "data"))
        args = ["fit", "--config", str(config), "--output_dir", str(out)]
    else:
        args = ["fit", "--config", "configs/quickstart.yaml", "--output_dir", str(out),
                "--data.init_args.root", str(work / "data"),
                # the same models in both versions: the small CNN and the published PRV control
                "--controls", '[{"class_path": "ppgbench_pl.encoders.prv.PublishedPRVEncoder"}]']
    if tag == "base":
        args += ["--trainer.logger", "false"]
    else:
        args += ["--wandb", "off"]
    return args, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-ref", default=FIRST_LANDING)
    parser.add_argument("--baseline-dir", type=Path, default=Path(tempfile.gettempdir()) / "ppgbench-baseline")
    parser.add_argument("--scenario", choices=["linear3000", "quickstart", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=3)
    ns = parser.parse_args()
    base = baseline_checkout(ns.baseline_ref, ns.baseline_dir)
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONHASHSEED": "0"}
    scenarios = ["linear3000", "quickstart"] if ns.scenario == "all" else [ns.scenario]
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    try:
        for name in scenarios:
            # warm-up: generate the synthetic trees and fill the OS cache for both versions
            for tag, source in (("base", base), ("new", ROOT)):
                args, _ = scenario_args(name, work, tag)
                run_child(source, args, env)
            cpu: dict[str, list[float]] = {"base": [], "new": []}
            wall: dict[str, list[float]] = {"base": [], "new": []}
            jobs: dict[str, list[float]] = {"base": [], "new": []}
            outs: dict[str, Path] = {}
            for _ in range(ns.repeats):
                for tag, source in (("base", base), ("new", ROOT)):
                    args, out = scenario_args(name, work, tag)
                    c, w = run_child(source, args, env)
                    cpu[tag].append(c)
                    wall[tag].append(w)
                    jobs[tag].append(job_seconds(out))
                    outs[tag] = out
            med = {k: {"cpu": statistics.median(cpu[k]), "wall": statistics.median(wall[k]),
                       "jobs": statistics.median(jobs[k])} for k in cpu}
            print(f"{name} (median of {ns.repeats}, baseline {ns.baseline_ref}):")
            for what, label in (("cpu", "whole process, CPU s"), ("wall", "whole process, wall s"),
                                ("jobs", "inside jobs (records), CPU s")):
                b, n = med["base"][what], med["new"][what]
                ratio = b / max(n, 1e-9)
                target = TARGETS.get((name, what))
                verdict = f"   target x{target:g}: {'PASS' if ratio >= target else 'FAIL'}" if target else ""
                print(f"  {label:<28} baseline {b:8.2f}   now {n:8.2f}   x{ratio:.2f}{verdict}")
            print(compare_summaries(outs["base"], outs["new"], 1e-9))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
