"""Benchmark the MLP-probe search: Lightning one-trial-at-a-time reference vs the batched engine.

Runs the same Optuna TPE + Hyperband search (protocol space, SQLite storage as in the regime) on
synthetic embeddings of realistic size, three ways:

* ``reference``: ``engine=lightning``, one trial at a time (one ``Trainer.fit`` per trial, pruning callback);
* ``batched-1``: the stacked engine, still one trial asked at a time (the same sampling as the reference);
* ``batched-P``: the stacked engine with P trials asked and trained together (constant-liar TPE).

and prints wall time, speed-up over the reference, the selected (best-trial) validation score, and the
winner's test score.

    .venv/bin/python tools/bench_mlp.py --n 2000 --dim 512 --trials 48 --epochs 25 --parallel 8
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import torch

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.hpo.optuna_search import (
    OptunaSettings,
    best_trial,
    close_storage,
    open_storage,
    open_study,
    run_search,
    storage_url,
)
from ppgbench_pl.hpo.spaces import MLP_SPACE, build_space
from ppgbench_pl.metrics.scores import selection_score
from ppgbench_pl.regimes.mlp import MLP_PARAMS, EmbeddingHeadEngine
from ppgbench_pl.regimes.neural import SelectionScorer, Split, make_targets


def make_data(n: int, dim: int, n_groups: int, task: str, seed: int):
    """Embeddings with a low-rank, nonlinear signal, per-group offsets and noise; group-disjoint split."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), int(np.ceil(n / n_groups)))[:n].astype(str)
    latent = rng.normal(size=(n, 8))
    offsets = rng.normal(size=(n_groups, dim)) * 0.5
    x = latent @ rng.normal(size=(8, dim)) + offsets[groups.astype(int)] + rng.normal(size=(n, dim))
    signal = latent[:, 0] + 0.5 * np.tanh(latent[:, 1] * latent[:, 2])
    if task == "regression":
        y = (70 + 10 * signal).astype(np.float32)
    elif task == "binary":
        y = (signal > 0.3).astype(np.int64)
    else:
        y = np.digitize(signal, np.quantile(signal, [0.25, 0.5, 0.75])).astype(np.int64)
    order = rng.permutation(n_groups).astype(str)
    test_g, val_g = order[: n_groups // 5], order[n_groups // 5 : n_groups // 5 + n_groups // 5]
    test, val = np.flatnonzero(np.isin(groups, test_g)), np.flatnonzero(np.isin(groups, val_g))
    fit = np.flatnonzero(~np.isin(groups, np.concatenate([test_g, val_g])))
    return x.astype(np.float32), y, groups, Split(fit, val, test)


def run(name: str, engine: str, parallel: int, args: argparse.Namespace, data, work: Path) -> dict:
    x, y, groups, split = data
    kind = "regression" if args.task == "regression" else "classification"
    spec = TaskSpec("bench", "bench", "y", kind, "window", "primary")  # type: ignore[arg-type]
    outer = np.concatenate([split.fit, split.val])
    targets = make_targets(spec, y[outer], y[split.fit], groups[split.fit], "balanced", "bench")
    scorer = SelectionScorer(targets, y[split.val], groups[split.val], "auroc")

    def make_trainer(callbacks, **overrides):
        return L.Trainer(callbacks=callbacks, accelerator=args.device, devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, precision="32-true", **overrides)

    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    eng = EmbeddingHeadEngine(x, y, split, targets, scorer, MLP_SPACE, MLP_PARAMS, args.seed, args.epochs,
                              engine, make_trainer, device)
    settings = OptunaSettings(n_trials=args.trials, max_epochs=args.epochs, parallel_trials=parallel)
    storage = open_storage(storage_url(None, work / name, "bench", 0))
    start = time.perf_counter()
    try:
        study = open_study(storage, "bench", settings, seed=args.seed)
        run_search(study, settings, build_space(MLP_SPACE), eng.run_batch)
        best = best_trial(study)
        seconds = time.perf_counter() - start
        params = dict(best.params)
        weights = eng.train_fixed(params, args.seed + best.number, int(best.user_attrs["best_epoch"]))
        test_pred = targets.predictions(eng.predict(params, weights, split.test))
        test_score = selection_score(kind, y[split.test], test_pred, "auroc")
        states = [t.state.name for t in study.trials]
        trial_epochs = sum(int(t.user_attrs.get("epochs_run", 0)) for t in study.trials)
    finally:
        close_storage(storage)
    return {"name": name, "seconds": seconds, "val": best.value, "test": test_score, "params": params,
            "complete": states.count("COMPLETE"), "pruned": states.count("PRUNED"),
            "trial_epochs": trial_epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="embedding rows")
    parser.add_argument("--dim", type=int, default=512, help="embedding size")
    parser.add_argument("--groups", type=int, default=40, help="subjects")
    parser.add_argument("--task", choices=["regression", "binary", "multiclass"], default="regression")
    parser.add_argument("--trials", type=int, default=48)
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--parallel", type=int, default=8, help="trials stacked by the batched engine")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave the default)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--skip-reference", action="store_true", help="only the batched runs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    data = make_data(args.n, args.dim, args.groups, args.task, args.seed)
    split = data[3]
    print(f"{args.task}: {args.n} x {args.dim} embeddings, {args.groups} groups (fit {len(split.fit)}, "
          f"val {len(split.val)}, test {len(split.test)}); {args.trials} trials x <= {args.epochs} "
          f"epochs; torch threads {torch.get_num_threads()}, device {args.device}")
    runs = [] if args.skip_reference else [("reference", "lightning", 1)]
    runs += [("batched-1", "batched", 1), (f"batched-{args.parallel}", "batched", args.parallel)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, engine, parallel in runs:
            result = run(name, engine, parallel, args, data, Path(tmp))
            results.append(result)
            print(f"{name:>12}: {result['seconds']:8.1f} s  selected val {result['val']:.4f}  "
                  f"test {result['test']:.4f}  ({result['complete']} complete, {result['pruned']} pruned, "
                  f"{result['trial_epochs']} trial-epochs, "
                  f"{1000 * result['seconds'] / result['trial_epochs']:.0f} ms each)  {result['params']}",
                  flush=True)
    first = results[0]
    for result in results[1:]:
        per_epoch = (first["seconds"] / first["trial_epochs"]) / (result["seconds"] / result["trial_epochs"])
        print(f"time ratio {first['name']} / {result['name']}: {first['seconds'] / result['seconds']:.1f}x "
              f"(per trial-epoch {per_epoch:.1f}x)")


if __name__ == "__main__":
    main()
