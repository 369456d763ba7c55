"""Benchmark finetuning searches: trials one after another (Lightning) vs stacked trials (torch.func).

Runs the same FinetuneRegime job (small CNN, synthetic data, one holdout repeat, protocol space unless
``--batch-sizes`` narrows it) twice: ``engine=lightning`` (one ``Trainer.fit`` per trial, one after
another) and ``engine=stacked`` (the ``parallel_trials`` asked together train as stacked models), and
prints CPU seconds (``process_time``), wall seconds, the ratio, and both winners' validation and test
scores (the engines sample the same trials; they differ only by float rounding).

    .venv/bin/python tools/bench_finetune.py --trials 8 --epochs 4
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.finetune import FinetuneRegime

#: Largest relative difference of a trial's validation value between the engines (float rounding only).
TOLERANCE = 1e-3


def run(engine: str, args: argparse.Namespace, dm: PPGDataModule, work: Path) -> dict:
    encoder = SmallCNNEncoder(embed_dim=args.embed_dim)
    ctx = JobContext.build(
        dm,
        encoder,
        get_task(args.task),
        42,
        0,
        work / engine,
        trainer_kwargs={"accelerator": args.device, "devices": 1},
    )
    space = {"batch_size": args.batch_sizes} if args.batch_sizes else None
    regime = FinetuneRegime(
        SearchSettings(
            n_trials=args.trials,
            n_startup_trials=args.trials,
            max_epochs=args.epochs,
            parallel_trials=args.parallel,
        ),
        engine=engine,
        stack_mode=args.stack_mode,
        subject_repeats=1,
        search_space=space,
        reseed_head=True,
    )
    torch.manual_seed(0)
    cpu, wall = time.process_time(), time.perf_counter()
    (outcome,) = regime.run(ctx)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    trials = outcome.details["optuna"]["trials"]
    epochs = sum(int(t["user_attrs"].get("epochs_run", 0)) for t in trials)
    return {
        "engine": engine,
        "cpu": cpu,
        "wall": wall,
        "val": outcome.details["winner"]["value"],
        "test": outcome.metrics[ctx.task.metric],
        "trial_epochs": epochs,
        "n": len(trials),
        "fit_windows": outcome.details["holdout"]["fit_windows"],
        "params": [t["params"] for t in trials],
        "values": {t["number"]: t["value"] for t in trials if t.get("value") is not None and t["state"] == "COMPLETE"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--subjects", type=int, default=30)
    parser.add_argument("--windows", type=int, default=40, help="windows per subject")
    parser.add_argument("--embed-dim", type=int, default=32)
    parser.add_argument("--task", default="synthetic-hr")
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="*",
        default=None,
        help="replace the protocol's batch sizes (e.g. 128: one stack of all trials)",
    )
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--stack-mode", choices=["auto", "vmap", "interleaved"], default="auto")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="paired runs (order alternates); median ratio")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        dm = PPGDataModule(
            dataset="synthetic",
            root=str(Path(tmp) / "data"),
            seeds=[42],
            folds=[0],
            synthetic_subjects=args.subjects,
            synthetic_windows=args.windows,
        )
        pairs = []
        for rep in range(args.repeats):  # alternate the order, so neither engine always runs warm
            order = ("lightning", "stacked") if rep % 2 == 0 else ("stacked", "lightning")
            got = {engine: run(engine, args, dm, Path(tmp) / f"r{rep}") for engine in order}
            pairs.append((got["lightning"], got["stacked"]))
    print(
        f"finetune, small CNN (embed {args.embed_dim}), {args.task}: {pairs[0][0]['fit_windows']} fit windows;"
        " "
        f"{args.trials} trials x <= {args.epochs} epochs, parallel {args.parallel}, batch sizes "
        f"{args.batch_sizes or 'protocol'}; torch threads {torch.get_num_threads()}, device {args.device}, "
        f"stack mode {args.stack_mode}"
    )
    for rep, (seq, stacked) in enumerate(pairs):
        for r in (seq, stacked):
            print(
                f"{rep}: {r['engine']:>10}: cpu {r['cpu']:7.1f} s  wall {r['wall']:7.1f} s  winner val "
                f"{r['val']:.4f}  test {r['test']:.4f}  ({r['n']} trials, {r['trial_epochs']} trial-epochs)"
            )
        same = seq["params"] == stacked["params"]
        common = [t for t in seq["values"] if t in stacked["values"]]
        diff = max((abs(seq["values"][t] - stacked["values"][t]) / max(1.0, abs(seq["values"][t])) for t in common),
                   default=0.0)
        verdict = "PASS" if same and diff <= TOLERANCE else "FAIL"
        print(f"{rep}: same trials asked: {'yes' if same else 'NO'}; largest relative difference of a trial's value "
              f"(both finished): {diff:.1e} (tolerance {TOLERANCE:g}: {verdict})")
    cpu = statistics.median(s["cpu"] / t["cpu"] for s, t in pairs)
    wall = statistics.median(s["wall"] / t["wall"] for s, t in pairs)
    print(
        f"ratio sequential / stacked (median of {len(pairs)} paired runs): cpu {cpu:.2f}x  wall {wall:.2f}x"
        f"  (target >= 2x cpu: {'PASS' if cpu >= 2 else 'not met'})"
    )

if __name__ == "__main__":
    main()
