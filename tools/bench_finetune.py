"""Benchmark finetuning trials: 8 trials in one stacked ``Trainer.fit`` vs one ``Trainer.fit`` per trial.

The same 8 trials (small CNN encoder + MLP head, parameters drawn from the protocol's finetune space with a
fixed seed, synthetic windows of one job's holdout-fit part) train for ``--epochs`` epochs twice, in this
process: each in its own fit of a one-slot ``TrialStack`` (one after another), and all 8 as one stack.
It prints CPU seconds (``process_time``), wall seconds, the ratio, and the largest difference between the
two runs' final validation outputs (per-trial arithmetic is the same, so only float rounding may differ).

With ``--reference`` the first landing (``--baseline-ref``, its package unpacked from git) trains the same
8 trials too, the way it trained every finetune trial: one ``Trainer.fit`` of an ``EncoderTask`` per trial,
one after another (``FinetuneEngine.train_fixed``), in a fresh process after an untimed one-epoch warm-up
and at the same torch thread count. Its final validation outputs are compared with the stack's as well.

    .venv/bin/python tools/bench_finetune.py --trials 8 --epochs 3 --repeats 3 --threads 1 --reference
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import torch

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.hpo.spaces import FINETUNE_SPACE
from ppgbench_pl.regimes.base import JobContext

#: The first landing: finetune trials trained one ``Trainer.fit`` each (``regimes/finetune.py: FinetuneEngine``).
BASELINE_REF = "223bccd"


def trainer(device: str) -> L.Trainer:
    """Fixed-length slots, ended and put in their modes by a neural regime's hooks (as in the benchmark)."""
    from ppgbench_pl.regimes.mlp import MLPRegime  # this tree only (the worker imports the old one)

    return L.Trainer(accelerator=device, devices=1, max_epochs=-1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                     callbacks=[MLPRegime()])


def trial_params(n: int, batch_sizes: list[int] | None, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    space = dict(FINETUNE_SPACE, **({"batch_size": batch_sizes} if batch_sizes else {}))
    return [{k: rng.choice(v) for k, v in space.items()} for _ in range(n)]


def run(factory, params: list[dict], epochs: int, stacked: bool, device: str) -> tuple:
    from ppgbench_pl.hpo.trial_stack import TrialStack

    slots = [factory.slot(f"t/{i}", p, 42 + i, epochs, validate=False) for i, p in enumerate(params)]
    cpu, wall = time.process_time(), time.perf_counter()
    if stacked:
        trainer(device).fit(TrialStack(slots))
    else:
        for slot in slots:
            trainer(device).fit(TrialStack([slot]))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    x_val = factory.inputs(factory.split.val)
    with torch.no_grad():
        outs = [s.net.eval().cpu()(x_val).numpy() for s in slots]
    return cpu, wall, outs


def data_settings(args: argparse.Namespace, root: Path) -> dict:
    """The synthetic data module's arguments, the same on both sides."""
    return {"dataset": "synthetic", "root": str(root), "seeds": [42], "folds": [0],
            "synthetic_subjects": args.subjects, "synthetic_windows": args.windows}


def reference_worker(spec: dict) -> dict:
    """The first landing's trials (its package is the importable ``ppgbench_pl``), timed in this process."""
    from ppgbench_pl.regimes.finetune import FinetuneEngine
    from ppgbench_pl.regimes.neural import Split as OldSplit
    from ppgbench_pl.regimes.neural import make_targets as old_targets

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    dm = PPGDataModule(**spec["data"])
    ctx = JobContext(  # the first landing's dataclass fields: id, model, encoder, task, seed, fold, data, ...
        "bench", "small_cnn", SmallCNNEncoder(embed_dim=spec["embed_dim"]), get_task(spec["task"]), 42, 0, dm,
        Path(spec["work"]), None, {"accelerator": "cpu", "devices": 1})
    view = ctx.view()
    outer, test = ctx.outer()
    fit, val = dm.holdout(view, outer, 42, 0)
    targets = old_targets(ctx.task, view.y[outer], view.y[fit], view.groups[fit], "balanced", "bench")
    engine = FinetuneEngine(ctx, OldSplit(fit, val, test), targets, None, 42, spec["epochs"],
                            ctx.make_trainer, "32-true")
    engine.train_fixed(spec["params"][0], 0, 1)  # untimed warm-up
    cpu, wall = time.process_time(), time.perf_counter()
    weights = [engine.train_fixed(p, 42 + i, spec["epochs"]) for i, p in enumerate(spec["params"])]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    outs = [engine.predict(p, w, val) for p, w in zip(spec["params"], weights, strict=True)]
    np.savez(spec["out"], *outs)
    return {"cpu": cpu, "wall": wall, "fit": len(fit), "val": val.tolist()}


def run_reference(args: argparse.Namespace, params: list[dict], tmp: Path) -> tuple[float, float, list, list]:
    """One reference run in a fresh process: (CPU s, wall s, validation outputs, validation positions)."""
    from bench_mlp import extract_revision  # tools/ is on sys.path when a tool runs as a script

    old = extract_revision(args.baseline_ref, tmp / "baseline")
    spec = {"data": data_settings(args, tmp / "data-old"), "embed_dim": args.embed_dim, "task": args.task,
            "work": str(tmp / "job-old"), "epochs": args.epochs, "params": params, "threads": args.threads,
            "out": str(tmp / "reference.npz")}
    env = {**os.environ, "PYTHONPATH": str(old), "WANDB_MODE": "disabled"}
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=env, check=True,
                         capture_output=True, text=True, cwd=tmp).stdout
    got = json.loads(out.strip().splitlines()[-1])
    with np.load(spec["out"]) as arrays:
        outs = [arrays[f"arr_{i}"] for i in range(len(params))]
    return got["cpu"], got["wall"], outs, got["val"]


def largest_difference(a: list, b: list) -> float:
    """Largest difference between two runs' validation outputs, trial by trial, relative to the output scale."""
    return max(float(np.max(np.abs(x - y)) / (np.max(np.abs(x)) + 1e-12)) for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--subjects", type=int, default=30)
    parser.add_argument("--windows", type=int, default=40, help="windows per subject")
    parser.add_argument("--embed-dim", type=int, default=32)
    parser.add_argument("--task", default="synthetic-hr")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=None, help="replace the protocol's batch sizes")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="paired runs (order alternates); median ratio")
    parser.add_argument("--reference", action="store_true",
                        help="also time the first landing's trials (one Trainer.fit each, one after another)")
    parser.add_argument("--baseline-ref", default=BASELINE_REF, help="git revision of the first landing")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(reference_worker(json.loads(args.worker))))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    from ppgbench_pl.regimes.finetune import FinetuneFactory
    from ppgbench_pl.regimes.neural import Split, make_targets

    with tempfile.TemporaryDirectory() as tmp:
        dm = PPGDataModule(**data_settings(args, Path(tmp) / "data"))
        ctx = JobContext.build(dm, SmallCNNEncoder(embed_dim=args.embed_dim), get_task(args.task), 42, 0,
                               Path(tmp) / "job", trainer_kwargs={"accelerator": args.device, "devices": 1})
        outer, test = ctx.outer()
        fit, val = ctx.holdout(0)
        view = ctx.view
        targets = make_targets(ctx.task, view.y[outer], view.y[fit], view.groups[fit], "balanced", "bench")
        factory = FinetuneFactory(ctx, Split(fit, val, test), targets, 42, True, None, "32-true")
        params = trial_params(args.trials, args.batch_sizes)
        print(f"{args.trials} finetune trials x {args.epochs} epochs of {len(fit)} windows (small CNN, "
              f"batch sizes {sorted({p['batch_size'] for p in params})}, {args.device})")
        ratios, stack_cpu = [], []
        for rep in range(args.repeats):
            order = (False, True) if rep % 2 == 0 else (True, False)
            got = {stacked: run(factory, params, args.epochs, stacked, args.device) for stacked in order}
            (cpu_a, wall_a, out_a), (cpu_s, wall_s, out_s) = got[False], got[True]
            diff = largest_difference(out_a, out_s)
            ratios.append(cpu_a / cpu_s)
            stack_cpu.append(cpu_s)
            print(f"{rep}: one fit per trial cpu {cpu_a:6.1f} s wall {wall_a:6.1f} s | stack cpu {cpu_s:6.1f} s "
                  f"wall {wall_s:6.1f} s | ratio cpu {cpu_a / cpu_s:.2f}x wall {wall_a / wall_s:.2f}x | "
                  f"largest difference of validation outputs {diff:.1e} of their scale")
        print(f"median cpu ratio (one fit per trial / stack): {statistics.median(ratios):.2f}x "
              f"(target >= 2x: {'PASS' if statistics.median(ratios) >= 2 else 'FAIL'})")
        if args.reference:
            cpu_r, wall_r, out_r, val_r = run_reference(args, params, Path(tmp))
            cpu_s = statistics.median(stack_cpu)
            same = val_r == factory.split.val.tolist()
            diff = largest_difference(out_r, out_s) if same else float("nan")
            print(f"first landing {args.baseline_ref} (one Trainer.fit per trial, fresh process): cpu {cpu_r:6.1f} s "
                  f"wall {wall_r:6.1f} s | against the stack's median cpu {cpu_s:.1f} s: {cpu_r / cpu_s:.2f}x "
                  f"(target >= 2x: {'PASS' if cpu_r / cpu_s >= 2 else 'FAIL'}) | "
                  + (f"largest difference of validation outputs {diff:.1e} of their scale" if same
                     else "other validation windows: outputs not compared"))


if __name__ == "__main__":
    main()
