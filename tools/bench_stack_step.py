"""Per slot-step cost of the trial stack: one Trainer.fit per trial vs one stacked fit vs a plain PyTorch loop.

Five MLP heads (LayerNorm-Linear-GELU-Dropout-Linear, 256 wide) on 1,800 x 64 rows, binary loss, fixed
epochs, in this process with one torch thread. It prints CPU seconds and milliseconds per slot-step for
the three ways, so Lightning's per-step cost (first vs second) and the trials' own compute (second vs
third) can be told apart.

    .venv/bin/python tools/bench_stack_step.py --batch-size 16
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import lightning as L
import torch
from torch.nn import functional as F

from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.trial_stack import Slot, SlotData, TrialStack
from ppgbench_pl.regimes.mlp import MLPRegime  # its hooks end the fixed-length slots and set their modes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    n, d, bs, k, epochs = 1800, 64, args.batch_size, args.slots, args.epochs
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=gen)
    y = (x[:, 0] > 0).float()
    data = SlotData(x, y, x[:600], "bce")

    def slot(i: int) -> Slot:
        torch.manual_seed(i)
        head = MLPHead(d, 1, 256, 0.3)
        return Slot(f"t/{i}", head, data, bs, i, [{"params": list(head.parameters()), "lr": 1e-3,
                                                   "weight_decay": 0.0}], epochs)

    def fit(slots: list[Slot]) -> None:
        L.Trainer(accelerator="cpu", devices=1, max_epochs=-1, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                  callbacks=[MLPRegime()]).fit(TrialStack(slots))

    def plain(i: int) -> None:
        torch.manual_seed(i)
        head = MLPHead(d, 1, 256, 0.3)
        opt = torch.optim.AdamW(head.parameters(), 1e-3, weight_decay=0.0, foreach=True)
        for _ in range(epochs):
            for b in torch.randperm(n).split(bs):
                loss = F.binary_cross_entropy_with_logits(head(x[b]).reshape(-1), y[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                head.eval()
                head(x[:600])
                head.train()

    fit([slot(0)])  # warm-up
    runs = {"one fit per trial": lambda: [fit([slot(i)]) for i in range(k)],
            "one stacked fit": lambda: fit([slot(i) for i in range(k)]),
            "plain PyTorch loop": lambda: [plain(i) for i in range(k)]}
    steps = k * epochs * -(-n // bs)
    for name, fn in runs.items():
        start = time.process_time()
        fn()
        cpu = time.process_time() - start
        print(f"{name:>20}: {cpu:6.2f} s CPU, {1e3 * cpu / steps:.2f} ms per slot-step (batch {bs}, {k} slots)")


if __name__ == "__main__":
    main()
