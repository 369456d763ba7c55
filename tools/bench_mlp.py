"""Benchmark the MLP-probe search: the first landing (a git revision) vs this tree, CPU seconds in one run.

The same work on both sides: ``--studies`` independent Optuna TPE + Hyperband searches (the outer folds of
one cell; protocol space, SQLite storage, ``--parallel`` trials asked at a time, 1 as published) on
synthetic embeddings, each side in a fresh process after an untimed warm-up:

* ``baseline``: the default engine at ``--baseline-ref`` (the first landing's ``batched`` engine: heads
  trained by its own loop and a fused AdamW, no ``Trainer``), its searches one after another;
* ``reference`` (``--reference``): the first landing's ``lightning`` engine, one ``Trainer.fit`` of an
  ``EncoderTask`` per trial, the way a trial is trained on its own;
* ``stack``: this tree, the searches side by side in one ``Trainer.fit`` of a ``TrialStack``.

It prints CPU seconds (``process_time``), the winners' validation and mean test score, trial-epochs, and
the ratio (target: >= 3x less CPU at an equal holdout score). The two sides draw other trials (other
seeds for heads and dropout), so the holdout scores are compared, not the trials.

    .venv/bin/python tools/bench_mlp.py --n 3000 --dim 64 --trials 12 --studies 5 --threads 1 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from io import BytesIO
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: The revision whose MLP engine is "today's": before stacked trials and in-memory pruning.
BASELINE_REF = "223bccd"


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
    return x.astype(np.float32), y, groups, SimpleNamespace(fit=fit, val=val, test=test)


#: Slots per epoch and per training step of the stacked fit (this tree only): the stack width reached.
WIDTH: dict[str, list[int]] = {"epoch": [], "step": []}


def worker(spec: dict) -> dict:
    """One search in this process with whatever ``ppgbench_pl`` is importable (old or new API)."""
    import lightning as L
    import torch

    from ppgbench_pl.data.registry import TaskSpec
    from ppgbench_pl.hpo import optuna_search as search_module

    try:
        from ppgbench_pl.hpo import trial_stack as search_module_stack
    except ImportError:  # the baseline revision
        search_module_stack = None
    from ppgbench_pl.hpo.spaces import MLP_SPACE, build_space
    from ppgbench_pl.metrics.scores import selection_score
    from ppgbench_pl.regimes.neural import SelectionScorer, Split, make_targets

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    d = np.load(spec["data"])
    x, y, groups = d["x"], d["y"], d["groups"]
    split = Split(d["fit"], d["val"], d["test"])
    kind = "regression" if spec["task"] == "regression" else "classification"
    task = TaskSpec("bench", "bench", "y", kind, "window", "primary")  # type: ignore[arg-type]
    outer = np.concatenate([split.fit, split.val])
    targets = make_targets(task, y[outer], y[split.fit], groups[split.fit], "balanced", "bench")
    scorer = SelectionScorer(targets, y[split.val], groups[split.val], "auroc")

    def make_trainer(callbacks, **overrides):
        return L.Trainer(
            callbacks=callbacks,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            precision="32-true",
            **overrides,
        )

    def stack_search(work: Path, n_trials: int, epochs: int, parallel: int, studies: int) -> tuple:
        """This tree: ``studies`` independent studies (seeds r + k) searched side by side in one Trainer.fit."""
        from ppgbench_pl.hpo.stack_search import StackSearch, StudyPlan
        from ppgbench_pl.regimes.mlp import MLP_PARAMS, HeadFactory, MLPRegime

        class Step(MLPRegime):  # the regime's own hooks: the search step and each trial's modes
            def on_train_epoch_end(self, trainer, pl_module):
                WIDTH["epoch"].append(len(pl_module.epoch_slots))
                super().on_train_epoch_end(trainer, pl_module)

            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                WIDTH["step"].append(len(batch))

        settings = search_module.SearchSettings(n_trials=n_trials, max_epochs=epochs,
                                                parallel_trials=parallel).resolved(epochs, parallel)
        factory = HeadFactory(x, y, split, targets, MLP_PARAMS, MLP_SPACE, make_trainer)
        storages, plans, results = [], [], []
        for k in range(studies):
            r = spec["seed"] + 1009 * k
            storage = search_module.open_storage(search_module.storage_url(None, work, "bench", k))
            storages.append(storage)
            study = search_module.PersistentStudy(storage, f"bench{k}", settings, seed=r)
            weights: dict = {}

            def keep(number, value, state, weights=weights):
                weights[number] = state

            def make_slot(key, number, params, r=r):
                return factory.slot(f"{key}/{number}", params, r + number, epochs, validate=True)

            plans.append(StudyPlan(f"s{k}", study, build_space(MLP_SPACE), make_slot,
                                   lambda out, params: scorer(out), epochs, keep))
            results.append((study, weights))
        try:
            search = StackSearch(plans)
            module = search_module_stack.TrialStack(search.first_slots())
            module.search = search
            make_trainer([Step()], max_epochs=-1).fit(module)
            out = []
            for study, weights in results:
                best = search_module.best_trial(study.study)
                params = dict(best.params)
                test_pred = targets.predictions(factory.predict(params, weights[best.number], split.test))
                trials = [[t.number, t.state.name, sorted(t.params.items()), int(t.user_attrs.get("epochs_run", 0))]
                          for t in study.study.trials]
                out.append((best, selection_score(kind, y[split.test], test_pred, "auroc"), trials))
        finally:
            for storage in storages:
                search_module.close_storage(storage)
        return out[0][0], float(np.mean([o[1] for o in out])), [t for o in out for t in o[2]]

    def search(work: Path, n_trials: int, epochs: int, parallel: int, studies: int = 1) -> tuple:
        if not hasattr(search_module, "run_search"):
            return stack_search(work, n_trials, epochs, parallel, studies)
        if studies > 1:  # the baseline revision: the independent searches one after another
            runs = [search(work / f"s{k}", n_trials, epochs, parallel) for k in range(studies)]
            return runs[0][0], float(np.mean([r[1] for r in runs])), [t for r in runs for t in r[2]]
        from ppgbench_pl.regimes.mlp import MLP_PARAMS, EmbeddingHeadEngine

        eng = EmbeddingHeadEngine(x, y, split, targets, scorer, MLP_SPACE, MLP_PARAMS, spec["seed"], epochs,
                                  spec["engine"], make_trainer, torch.device("cpu"))
        if hasattr(search_module, "SearchSettings"):
            settings = search_module.SearchSettings(
                n_trials=n_trials, max_epochs=epochs, parallel_trials=parallel
            ).resolved(epochs, parallel)
        else:  # the baseline revision
            settings = search_module.OptunaSettings(n_trials=n_trials, max_epochs=epochs, parallel_trials=parallel)
        storage = search_module.open_storage(search_module.storage_url(None, work, "bench", 0))
        try:
            study = search_module.open_study(storage, "bench", settings, seed=spec["seed"])
            search_module.run_search(study, settings, build_space(MLP_SPACE), eng.run_batch)
            best = search_module.best_trial(study)
            params = dict(best.params)
            weights = eng.train_fixed(params, spec["seed"] + best.number, int(best.user_attrs["best_epoch"]))
            test_pred = targets.predictions(eng.predict(params, weights, split.test))
            test_score = selection_score(kind, y[split.test], test_pred, "auroc")
            trials = [[t.number, t.state.name, sorted(t.params.items()), int(t.user_attrs.get("epochs_run", 0))]
                      for t in study.trials]
        finally:
            search_module.close_storage(storage)
        return best, test_score, trials

    if spec["warmup"]:  # untimed: one-off costs of the process
        search(Path(spec["work"]) / "warmup", 2, 2, 2)
    WIDTH["epoch"].clear()
    WIDTH["step"].clear()
    start_cpu, start = time.process_time(), time.perf_counter()
    best, test_score, trials = search(Path(spec["work"]), spec["trials"], spec["epochs"], spec["parallel"],
                                      spec.get("studies", 1))
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
    states = [t[1] for t in trials]
    return {
        "cpu": cpu,
        "wall": wall,
        "val": best.value,
        "test": test_score,
        "complete": states.count("COMPLETE"),
        "pruned": states.count("PRUNED"),
        "trial_epochs": sum(t[3] for t in trials),
        "trials": trials,
        "width": {k: [float(np.mean(v)), max(v)] if v else None for k, v in WIDTH.items()},
    }


def extract_revision(ref: str, into: Path) -> Path:
    """The package at a git revision, unpacked (read-only use of the repository)."""
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "ppgbench_pl"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into


def run(
    name: str, engine: str, parallel: int, args: argparse.Namespace, data: Path, work: Path, pythonpath: Path
) -> dict:
    """One search in a fresh process (imports and start-up not timed)."""
    spec = {
        "data": str(data),
        "work": str(work / name),
        "engine": engine,
        "parallel": parallel,
        "trials": args.trials,
        "epochs": args.epochs,
        "seed": args.seed,
        "task": args.task,
        "threads": args.threads,
        "warmup": not args.no_warmup,
        "studies": args.studies,
    }
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "WANDB_MODE": "disabled"}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
    ).stdout
    return {"name": name, **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=3000, help="embedding rows")
    parser.add_argument("--dim", type=int, default=64, help="embedding size")
    parser.add_argument("--groups", type=int, default=40, help="subjects")
    parser.add_argument("--task", choices=["regression", "binary", "multiclass"], default="binary")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--parallel", type=int, default=1, help="trials a study asks together (1 published)")
    parser.add_argument("--studies", type=int, default=5, help="independent studies (the folds of a cell)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave the default)")
    parser.add_argument("--baseline-ref", default=BASELINE_REF, help="git revision of today's engine")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians are printed")
    parser.add_argument("--no-warmup", action="store_true", help="time the process's one-off costs too")
    parser.add_argument("--reference", action="store_true",
                        help="also time the first landing's reference engine (one Trainer.fit per trial)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    x, y, groups, split = make_data(args.n, args.dim, args.groups, args.task, args.seed)
    print(
        f"{args.task}: {args.n} x {args.dim} embeddings, {args.groups} groups (fit {len(split.fit)}, "
        f"val {len(split.val)}, test {len(split.test)}); {args.trials} trials x <= {args.epochs} epochs; "
        f"{args.repeats} interleaved rounds, {'no warm-up' if args.no_warmup else 'after an untimed warm-up'}"
    )
    runs = [("baseline", "batched", args.parallel, "old"), ("stack", "stack", args.parallel, "new")]
    if args.reference:
        runs.insert(0, ("reference", "lightning", args.parallel, "old"))
    rounds: list[dict[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "data.npz"
        np.savez(data, x=x, y=y, groups=groups, fit=split.fit, val=split.val, test=split.test)
        paths = {"old": extract_revision(args.baseline_ref, work / "baseline"), "new": ROOT}
        for r in range(args.repeats):
            rounds.append({})
            for name, engine, parallel, version in runs:
                result = run(f"{name}.{r}", engine, parallel, args, data, work, paths[version])
                rounds[-1][name] = result
                print(
                    f"{name:>12} [{r + 1}/{args.repeats}]: cpu {result['cpu']:7.2f} s  wall {result['wall']:7.2f} s  "
                    f"holdout {result['val']:.4f}  test {result['test']:.4f}  ({result['complete']} complete, "
                    f"{result['pruned']} pruned, {result['trial_epochs']} trial-epochs)",
                    flush=True,
                )
    first = rounds[0]
    width = first["stack"].get("width") or {}
    if width.get("epoch"):
        print(f"stack width: {width['epoch'][0]:.1f} slots per epoch on average (at most {width['epoch'][1]}), "
              f"{width['step'][0]:.1f} per training step (at most {width['step'][1]})")
    for name, *_ in runs:
        cpu = statistics.median(rnd[name]["cpu"] for rnd in rounds)
        wall = statistics.median(rnd[name]["wall"] for rnd in rounds)
        print(f"{name:>12}: median cpu {cpu:7.2f} s  wall {wall:7.2f} s  "
              f"({1e3 * cpu / first[name]['trial_epochs']:.1f} ms CPU per trial-epoch)")
    pairs = [("baseline", "stack")] + ([("reference", "stack")] if args.reference else [])
    for base_name, name in pairs:
        base, result = first[base_name], first[name]
        cpu = statistics.median(rnd[base_name]["cpu"] / rnd[name]["cpu"] for rnd in rounds)
        wall = statistics.median(rnd[base_name]["wall"] / rnd[name]["wall"] for rnd in rounds)
        verdict = "equal or better" if result["val"] >= base["val"] - 1e-9 else "worse"
        same = "same trials" if _same_trials(base["trials"], result["trials"]) else (
            f"other trials: {base['trial_epochs']} vs {result['trial_epochs']} trial-epochs")
        print(
            f"ratio {base_name} / {name}: cpu {cpu:.2f}x  wall {wall:.2f}x  "
            f"holdout {result['val'] - base['val']:+.4f} ({verdict}; {same})"
        )


def _same_trials(a: list, b: list) -> bool:
    """The same parameters, states and epochs per trial number."""
    return [[n, s, [list(kv) for kv in p], e] for n, s, p, e in a] == [
        [n, s, [list(kv) for kv in p], e] for n, s, p, e in b
    ]


if __name__ == "__main__":
    main()
