"""Benchmark finetuning trials: 8 trials in one stacked ``Trainer.fit`` vs one ``Trainer.fit`` per trial.

The same 8 trials (small CNN encoder + MLP head, parameters drawn from the protocol's finetune space with a
fixed seed, synthetic windows of one job's holdout-fit part) train for ``--epochs`` epochs twice, in this
process: each in its own fit of a one-slot ``TrialStack`` (one after another), and all 8 as one stack.
It prints CPU seconds (``process_time``), wall seconds, the ratio, and the largest difference between the
two runs' final validation outputs (per-trial arithmetic is the same, so only float rounding may differ).

    .venv/bin/python tools/bench_finetune.py --trials 8 --epochs 3 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
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
from ppgbench_pl.hpo.stack_search import fixed_epochs
from ppgbench_pl.hpo.trial_stack import TrialStack
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.finetune import FinetuneFactory
from ppgbench_pl.regimes.neural import Split, make_targets


class Fixed(L.Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        fixed_epochs(trainer, pl_module)


def trainer(device: str) -> L.Trainer:
    return L.Trainer(accelerator=device, devices=1, max_epochs=-1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                     callbacks=[Fixed()])


def trial_params(n: int, batch_sizes: list[int] | None, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    space = dict(FINETUNE_SPACE, **({"batch_size": batch_sizes} if batch_sizes else {}))
    return [{k: rng.choice(v) for k, v in space.items()} for _ in range(n)]


def run(factory: FinetuneFactory, params: list[dict], epochs: int, stacked: bool, device: str) -> tuple:
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
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        dm = PPGDataModule(dataset="synthetic", root=str(Path(tmp) / "data"), seeds=[42], folds=[0],
                           synthetic_subjects=args.subjects, synthetic_windows=args.windows)
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
        ratios = []
        for rep in range(args.repeats):
            order = (False, True) if rep % 2 == 0 else (True, False)
            got = {stacked: run(factory, params, args.epochs, stacked, args.device) for stacked in order}
            (cpu_a, wall_a, out_a), (cpu_s, wall_s, out_s) = got[False], got[True]
            diff = max(float(np.max(np.abs(a - s) / (np.abs(a) + 1e-6))) for a, s in zip(out_a, out_s, strict=True))
            ratios.append(cpu_a / cpu_s)
            print(f"{rep}: one fit per trial cpu {cpu_a:6.1f} s wall {wall_a:6.1f} s | stack cpu {cpu_s:6.1f} s "
                  f"wall {wall_s:6.1f} s | ratio cpu {cpu_a / cpu_s:.2f}x wall {wall_a / wall_s:.2f}x | "
                  f"max relative difference of validation outputs {diff:.1e}")
        print(f"median cpu ratio (one fit per trial / stack): {statistics.median(ratios):.2f}x "
              f"(target >= 2x: {'PASS' if statistics.median(ratios) >= 2 else 'FAIL'})")


if __name__ == "__main__":
    main()
