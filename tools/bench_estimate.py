"""The dry run's cost estimate beside the measured time of the synthetic suite, in the same run.

1. Calibrate this machine (``ppgbench calibrate``'s measured run, the suite's encoders included) into a
   temporary calibration folder, unless ``--stored`` takes the one already stored for this machine.
2. Estimate the suite (``configs/benchmark_synthetic.yaml`` by default: what ``--dry-run`` prints).
3. Run it for real (``ppgbench benchmark`` in a subprocess, W&B off, into a temporary folder) and read the
   job records' CPU seconds per regime and the wall time of the whole command.
4. Print estimate, measurement and their ratio per regime and in total; PASS when the total CPU and the wall
   time are within a factor of 2 (the issue's target on a quiet machine).

    .venv/bin/python tools/bench_estimate.py                     # the 280-job synthetic suite
    .venv/bin/python tools/bench_estimate.py --seeds 42          # half of it

A benchmark, not a test: exit status 0 on PASS, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def spec_and_overrides(args: argparse.Namespace, out: Path, data: Path) -> tuple[dict, list[str]]:
    """The suite spec of the config with this run's folders, and the same settings as command-line options."""
    from ppgbench_pl.commands.calibrate import config_spec

    extra = ["--output_dir", str(out), "--data.init_args.root", str(data), "--wandb", "off", "--progress", "false"]
    if args.seeds:
        extra += ["--data.init_args.seeds", json.dumps(args.seeds)]
    overrides = Path(tempfile.mkdtemp()) / "overrides.yaml"
    overrides.write_text(f"output_dir: {out}\nwandb: 'off'\nprogress: false\ndata:\n  init_args:\n"
                         f"    root: {data}\n" + (f"    seeds: {json.dumps(args.seeds)}\n" if args.seeds else ""))
    return config_spec([args.config, str(overrides)]), extra


def estimate(spec: dict, executor: dict, out: Path, stored: bool) -> tuple[object, object]:
    """(Estimate, CostModel) of the spec's plan, calibrating first unless ``stored``."""
    from ppgbench_pl.benchmark.calibrate import calibrate
    from ppgbench_pl.benchmark.cost_model import load_model, save_model
    from ppgbench_pl.benchmark.estimate import estimate_plan
    from ppgbench_pl.benchmark.suite import BenchmarkSuite

    if stored:
        model = load_model()
    else:
        start = time.perf_counter()
        model = calibrate([e for e in spec["encoders"] if "instance" not in e], spec["trainer"])
        save_model(model)
        print(f"calibrated in {time.perf_counter() - start:.1f} s wall ({model.seconds} s measured run)")
    suite = BenchmarkSuite(spec, out)
    plan = suite.plan(dry=True)
    from ppgbench_pl.benchmark.preflight import evaluable_plan

    plan, _ = evaluable_plan(suite, plan, dry=True)  # the tree: generated here, as the dry run reads it
    return estimate_plan(suite, plan, executor, model), model


def measured(out: Path) -> dict[str, float]:
    """CPU seconds per regime from the run's job records."""
    totals: dict[str, float] = {}
    for path in sorted((out / "jobs").glob("*/results.json")):
        record = json.loads(path.read_text())
        totals[record["regime"]] = totals.get(record["regime"], 0.0) + float(record.get("cpu_seconds") or 0.0)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "benchmark_synthetic.yaml"))
    parser.add_argument("--seeds", type=int, nargs="*", default=None, help="narrow the config's seeds")
    parser.add_argument("--stored", action="store_true", help="use this machine's stored calibration")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-estimate-"))
    if not args.stored:
        os.environ["PPGBENCH_CALIBRATION_DIR"] = str(work / "calibration")
    os.environ["PPGBENCH_CACHE_DIR"] = str(work / "embedding-cache")  # the suite's embeddings start uncached
    out, data = work / "run", work / "data"
    spec, extra = spec_and_overrides(args, out, data)
    import yaml

    executor = (yaml.safe_load(Path(args.config).read_text()).get("executor")
                or {"class_path": "ppgbench_pl.benchmark.executors.LocalExecutor"})
    est, model = estimate(spec, executor, out, args.stored)
    from ppgbench_pl.benchmark.estimate import describe_estimate

    print(describe_estimate(est, model))
    command = [str(Path(sys.executable).parent / "ppgbench"), "benchmark", "--config", args.config, *extra]
    import resource

    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"})
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    command_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        raise SystemExit(f"the suite failed (exit {done.returncode})")
    report(est, measured(out), wall, command_cpu, os.getloadavg()[0])


def report(est: object, cpu: dict[str, float], wall: float, command_cpu: float, load: float) -> None:
    """Estimate beside measurement, per regime and in total, with the verdict."""
    rows = []
    for name in dict.fromkeys(j.regime for j in est.jobs):  # type: ignore[attr-defined]
        guess = sum(j.seconds for j in est.jobs if j.regime == name)  # type: ignore[attr-defined]
        rows.append((name, guess, cpu.get(name, 0.0)))
    print(f"\n{'regime':<12} {'estimated CPU s':>16} {'measured CPU s':>15} {'ratio':>7}")
    for name, guess, got in rows:
        print(f"{name:<12} {guess:>16.1f} {got:>15.1f} {guess / got if got else float('nan'):>7.2f}")
    total_guess, total_got = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'jobs total':<12} {total_guess:>16.1f} {total_got:>15.1f} {total_guess / total_got:>7.2f}")
    from ppgbench_pl.benchmark.estimate import wall_seconds

    whole = total_guess + est.startup_s * est.processes + est.embedding_seconds  # type: ignore[attr-defined]
    print(f"{'command CPU':<12} {whole:>16.1f} {command_cpu:>15.1f} {whole / command_cpu:>7.2f}   "
          "(start-up of the command and its workers, embeddings, jobs)")
    guess = wall_seconds(est)  # type: ignore[arg-type]
    cores = os.cpu_count() or 1
    print(f"{'wall':<12} {guess:>16.1f} {wall:>15.1f} {guess / wall:>7.2f}   (load {load:.1f} on {cores} cores)")
    quiet = load <= 0.75 * cores
    ok = 0.5 <= total_guess / total_got <= 2 and 0.5 <= whole / command_cpu <= 2 and (
        not quiet or 0.5 <= guess / wall <= 2)
    print(("PASS" if ok else "FAIL") + ": CPU estimates within a factor of 2" + (
        " and wall too" if quiet else "; wall not judged: the machine is not quiet (other processes share its cores)"))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
