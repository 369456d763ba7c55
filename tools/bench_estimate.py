"""The dry run's cost estimate beside the measured run, per regime, on the three runs of issue 32 item 2.

For each run: the estimate ``--dry-run`` prints (this machine's stored calibration, else the documented
uncalibrated defaults, or ``--calibrate`` to measure one first into a temporary folder), then the real run
(``ppgbench fit`` in a subprocess, W&B off, into a temporary folder), its job records' CPU seconds per
regime, the command's CPU seconds (start-up, embeddings, jobs) and its wall time, and the ratios.

* ``quickstart``: ``configs/quickstart.yaml`` (linear regime, PRV control, constant baseline).
* ``smoke``: the MLP probe and finetuning under ``configs/budget/smoke.yaml``.
* ``published-mlp``: the published 48-trial MLP search (``configs/regime_mlp.yaml``), seed 42, folds 0 and 1.

The default is reduced (under two minutes of CPU): the quickstart on one seed and fold, the published MLP
run on the heart-rate task without controls, and jobs at one torch thread (``OMP_NUM_THREADS=1``).
``--full`` runs the three as configured (the published MLP run takes tens of minutes), at the machine's
default threads unless ``--threads`` says otherwise. CPU seconds are the measure (a shared machine
stretches wall time; the load is printed). PASS when every regime's and the command's CPU estimate is
within a factor of 1.5 of the measurement; wall is judged only on a quiet machine.

    .venv/bin/python tools/bench_estimate.py                 # reduced, ~1-2 min CPU
    .venv/bin/python tools/bench_estimate.py --full          # the three runs as configured
    .venv/bin/python tools/bench_estimate.py --only smoke --threads 2

A benchmark, not a test: exit status 0 on PASS, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
BOTH = """base: {base}
trainer:
  callbacks:
    - class_path: ppgbench_pl.regimes.mlp.MLPRegime
    - class_path: ppgbench_pl.regimes.finetune.FinetuneRegime
"""


def runs(work: Path, full: bool) -> dict[str, tuple[list[str], list[str]]]:
    """Run name -> (config files, extra command-line options)."""
    both = work / "mlp_finetune.yaml"
    both.write_text(BOTH.format(base=CONFIGS / "base.yaml"))
    quick = [] if full else ["--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]"]
    mlp = ["--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0,1]"]
    if not full:
        mlp += ["--data.init_args.tasks", "[synthetic-hr]", "--controls", "[]"]
    return {"quickstart": ([str(CONFIGS / "quickstart.yaml")], quick),
            "smoke": ([str(both), str(CONFIGS / "budget" / "smoke.yaml")], ["--trainer.accelerator", "cpu"]),
            "published-mlp": ([str(CONFIGS / "regime_mlp.yaml")], mlp + ["--trainer.accelerator", "cpu"])}


def estimate(configs: list[str], extra: list[str], out: Path, measure: bool = False) -> Any:
    """The dry run's :class:`~ppgbench_pl.benchmark.estimate.Estimate` of the run; ``measure``: its encoders' speed
    measured first, as ``ppgbench calibrate --config`` measures them."""
    from ppgbench_pl.benchmark.cost_model import load_model, save_model
    from ppgbench_pl.benchmark.estimate import describe_estimate, estimate_plan
    from ppgbench_pl.benchmark.preflight import evaluable_plan
    from ppgbench_pl.benchmark.protocol_cli import parse_setup
    from ppgbench_pl.commands.config_bases import expand_bases

    overrides = out.parent / f"{out.name}-overrides.yaml"
    overrides.write_text(json.dumps(overrides_of(extra, out)))
    setup = parse_setup(expand_bases([arg for f in [*configs, str(overrides)] for arg in ("--config", f)]))
    suite = setup.suite
    plan, _ = evaluable_plan(suite, suite.plan(dry=True), dry=True)
    from ppgbench_pl.benchmark.preflight import degenerate_jobs

    found = degenerate_jobs(suite, plan, dry=True)
    pending = [j for j in plan if j.job_id not in found]
    model = load_model()
    if measure:
        from ppgbench_pl.benchmark.calibrate import measure_listed

        save_model(measure_listed(model, suite.encoder_configs, suite.trainer_kwargs))
    executor = setup.settings.executor
    est = estimate_plan(suite, pending, executor, model)
    print(describe_estimate(est, model))
    return est


def overrides_of(extra: list[str], out: Path) -> dict[str, Any]:
    """The command-line options as a config file (JSON is YAML), for the in-process estimate."""
    import yaml

    data: dict[str, Any] = {"root": str(out.parent / "data")}
    top: dict[str, Any] = {"output_dir": str(out), "wandb": "off", "progress": False}
    for key, value in zip(extra[::2], extra[1::2], strict=True):
        name = key.removeprefix("--")
        if name.startswith("data.init_args."):
            data[name.removeprefix("data.init_args.")] = yaml.safe_load(value)
        elif name == "controls":
            top["controls"] = yaml.safe_load(value)
        elif name == "trainer.accelerator":
            top["trainer"] = {"accelerator": value}
    return {**top, "data": {"init_args": data}}


def measure(configs: list[str], extra: list[str], out: Path) -> tuple[dict[str, float], float, float, float]:
    """(CPU seconds per regime from the job records, command CPU, wall, load at the end) of the real run."""
    command = [str(Path(sys.executable).parent / "ppgbench"), "fit", *[a for c in configs for a in ("--config", c)],
               *extra, "--output_dir", str(out), "--data.init_args.root", str(out.parent / "data"), "--wandb", "off",
               "--progress", "false"]
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"})
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        raise SystemExit(f"the run failed (exit {done.returncode})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    totals: dict[str, float] = {}
    for path in sorted((out / "jobs").glob("*/results.json")):
        record = json.loads(path.read_text())
        if record.get("cpu_seconds") is not None:
            totals[record["regime"]] = totals.get(record["regime"], 0.0) + float(record["cpu_seconds"])
    return totals, cpu, wall, os.getloadavg()[0]


def report(name: str, est: Any, cpu: dict[str, float], command: float, wall: float, load: float) -> bool:
    """Estimate beside measurement per regime, the command and wall; True when every CPU ratio is within 1.5."""
    from ppgbench_pl.benchmark.estimate import wall_seconds

    print(f"\n{name}: {'regime':<14} {'estimated CPU s':>16} {'measured CPU s':>15} {'ratio':>7}")
    ratios = []
    for regime in dict.fromkeys(j.regime for j in est.jobs):
        guess = sum(j.seconds for j in est.jobs if j.regime == regime)
        got = cpu.get(regime, 0.0)
        ratio = guess / got if got else float("nan")
        ratios.append(ratio)
        print(f"{'':<{len(name) + 2}}{regime:<14} {guess:>16.1f} {got:>15.1f} {ratio:>7.2f}")
    whole = sum(j.seconds for j in est.jobs) + est.startup_s * est.processes + est.embedding_seconds
    ratios.append(whole / command)
    print(f"{'':<{len(name) + 2}}{'command CPU':<14} {whole:>16.1f} {command:>15.1f} {whole / command:>7.2f}")
    guess, cores = wall_seconds(est), os.cpu_count() or 1
    print(f"{'':<{len(name) + 2}}{'wall':<14} {guess:>16.1f} {wall:>15.1f} {guess / wall:>7.2f}   "
          f"(load {load:.1f} on {cores} cores; jobs at {est.threads} thread(s))")
    ok = all(1 / 1.5 <= r <= 1.5 for r in ratios if r == r)
    quiet = load <= 0.75 * cores
    return ok and (not quiet or 1 / 1.5 <= guess / wall <= 1.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the three runs as configured (tens of minutes)")
    parser.add_argument("--only", nargs="*", default=None, help="some of: quickstart smoke published-mlp")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of the jobs (OMP_NUM_THREADS)")
    parser.add_argument("--calibrate", action="store_true",
                        help="calibrate this machine first, and each run's encoders (a temporary file)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-estimate-"))
    threads = args.threads if args.threads is not None else (None if args.full else 1)
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["PPGBENCH_CACHE_DIR"] = str(work / "embedding-cache")  # every run's embeddings start uncached
    if args.calibrate:
        os.environ["PPGBENCH_CALIBRATION_DIR"] = str(work / "calibration")
        from ppgbench_pl.benchmark.calibrate import calibrate
        from ppgbench_pl.benchmark.cost_model import save_model

        save_model(calibrate())
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; {'full' if args.full else 'reduced'} runs")
    verdicts = {}
    for name, (configs, extra) in runs(work, args.full).items():
        if args.only and name not in args.only:
            continue
        print(f"\n== {name}: ppgbench fit {' '.join(Path(c).name for c in configs)} {' '.join(extra)}")
        est = estimate(configs, extra, work / f"{name}-dry", args.calibrate)
        verdicts[name] = report(name, est, *measure(configs, extra, work / name))
    ok = all(verdicts.values())
    print(("\nPASS" if ok else "\nFAIL") + ": " + ", ".join(f"{k} {'ok' if v else 'off'}" for k, v in verdicts.items())
          + " (CPU within x1.5 per regime and command; wall judged on a quiet machine only)")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
