"""The example scripts run as a user would run them (a fresh process, output where they are told)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def tiny_fit_args(tmp_path: Path) -> list[str]:
    """One seed, one fold, heart rate only, 10 synthetic subjects of 4 windows, no controls, on the CPU."""
    return ["--data.init_args.root", str(tmp_path / "data"), "--data.init_args.seeds", "[42]",
            "--data.init_args.folds", "[0]", "--data.init_args.tasks", "[synthetic-hr]",
            "--data.init_args.synthetic_subjects", "10", "--data.init_args.synthetic_windows", "4",
            "--controls", "[]", "--trainer.accelerator", "cpu", "--progress", "false"]


def test_evaluate_my_model_writes_a_report(tmp_path):
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg"}
    script = ROOT / "examples/evaluate_my_model.py"
    out = subprocess.run([sys.executable, str(script), "--output", str(tmp_path)], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "report" / "index.html").exists()
    assert (tmp_path / "summary.csv").exists() and "my_ppg_net" in out.stdout
    summary = pd.read_csv(tmp_path / "summary.csv")
    mine = summary[summary["model"] == "my_ppg_net"]
    assert set(mine["regime"]) == {"linear", "mlp"} and mine["mean"].notna().all()


def test_partial_finetune_callback_runs_in_every_trial_and_changes_the_result(tmp_path, monkeypatch):
    """examples/partial_finetune.yaml stacked on the finetune regime: a callback, a YAML file, no change to ppgbench."""
    import json

    import torch

    from ppgbench_pl.cli import main
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.chdir(ROOT)  # the callback's module is found from the project folder, as the README says
    common = tiny_fit_args(tmp_path)
    budget = '{"n_trials": 3, "n_startup_trials": 3, "max_epochs": 2, "parallel_trials": 3}'
    partial_regimes = ('[{"class_path": "ppgbench_pl.regimes.finetune.FinetuneRegime", "init_args": {"search": '
                       f'{budget}, "search_space": {{"batch_size": [16]}}}}}}, '
                       '{"class_path": "examples.partial_finetune.PartialFinetune", "init_args": {"trainable_layers": 2}}]')
    plain_regimes = partial_regimes.split(', {"class_path": "examples')[0] + "]"
    for name, callbacks in (("partial", partial_regimes), ("plain", plain_regimes)):
        main(["fit", "--config", str(ROOT / "configs/regime_finetune.yaml"), "--config",
              str(ROOT / "examples/partial_finetune.yaml"), "--output_dir", str(tmp_path / name), *common,
              "--trainer.callbacks", callbacks])
    records = {name: next(r for r in (json.loads(p.read_text()) for p in (tmp_path / name / "jobs").glob("*/results.json"))
                          if r["model"] == "small_cnn") for name in ("partial", "plain")}
    assert records["partial"]["status"] == records["plain"]["status"] == "ok"
    assert records["partial"]["callbacks"] == ["examples.partial_finetune.PartialFinetune"]
    assert records["plain"]["callbacks"] == []
    identity = json.loads((tmp_path / "partial" / "run.json").read_text())
    assert "PartialFinetune" in json.dumps(identity)
    trials = {name: [t["intermediate_values"] for t in r["results"][0]["optuna"]["trials"]] for name, r in records.items()}
    assert trials["partial"] != trials["plain"]  # frozen early layers give other validation curves
    # the winner's stored weights: the first conv layer was frozen in every epoch, so it is the pristine one
    job = records["partial"]["job_id"]
    (weights,) = (tmp_path / "partial" / "search" / job / "repeat0").glob("trial*.pt")
    state = torch.load(weights, weights_only=True)
    pristine = SmallCNNEncoder().state_dict()
    assert torch.equal(state["encoder.features.0.weight"], pristine["features.0.weight"])
    assert not torch.equal(state["encoder.features.6.weight"], pristine["features.6.weight"])


def test_partial_finetune_freezes_the_early_layers_of_every_trial(tmp_path):
    """The example knows nothing of the trial stack: each trial's fit freezes its own backbone's early layers."""
    from examples.partial_finetune import PartialFinetune, parameter_layers
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder
    from ppgbench_pl.hpo.optuna_search import SearchSettings
    from ppgbench_pl.regimes.finetune import FinetuneRegime
    from tests.regimes.neural_helpers import OneThread, context, datamodule

    seen: list[tuple[str, int, list[bool]]] = []

    class Recorded(PartialFinetune):
        def on_train_epoch_end(self, trainer, pl_module):
            trainable = [any(p.requires_grad for p in m.parameters(recurse=False))
                         for m in parameter_layers(pl_module.backbone)]
            seen.append((pl_module.slot.name, trainer.current_epoch, trainable))

    with OneThread():
        ctx = context(datamodule(tmp_path / "data"), SmallCNNEncoder(embed_dim=8), "synthetic-hr", tmp_path / "job")
        ctx.callbacks = [Recorded(trainable_layers=1)]
        (outcome,) = FinetuneRegime(SearchSettings(n_trials=4, n_startup_trials=4, max_epochs=2, parallel_trials=2),
                                    search_space={"batch_size": [16, 32]}, subject_repeats=1).run(ctx)
    expected = {(f"{ctx.job_id}/repeat0/{t['number']}", epoch) for t in outcome.details["optuna"]["trials"]
                for epoch in range(len(t["intermediate_values"]))}
    assert len({name for name, _ in expected}) == 4 and {(name, epoch) for name, epoch, _ in seen} == expected
    assert all(trainable[-1] and not any(trainable[:-1]) for _, _, trainable in seen)  # only the last layer learns


def test_train_on_ppgbench_folds_runs_and_its_splits_are_the_benchmarks(tmp_path, monkeypatch):
    """examples/train_on_ppgbench_folds.py: a plain Trainer.fit on PPGDataModule.job(...), scored with ppgbench's
    metrics; the job's outer split equals the one the benchmark's record of that job was made on."""
    import json

    import numpy as np

    from ppgbench_pl.cli import main
    from ppgbench_pl.datamodules import PPGDataModule

    env = {**os.environ, "WANDB_MODE": "disabled"}
    out = subprocess.run([sys.executable, str(ROOT / "examples/train_on_ppgbench_folds.py"), "--root",
                          str(tmp_path / "data"), "--max_epochs", "2"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "synthetic-hr seed 42 fold 0: MAE" in out.stdout

    monkeypatch.setenv("WANDB_MODE", "disabled")
    data = ["--data.init_args.root", str(tmp_path / "data"), "--data.init_args.seeds", "[43]",
            "--data.init_args.folds", "[2]", "--data.init_args.tasks", "[synthetic-hr]"]
    main(["fit", "--config", str(ROOT / "configs/quickstart.yaml"), "--output_dir", str(tmp_path / "run"), *data,
          "--controls", "[]", "--progress", "false", "--wandb", "off"])
    record = next(r for r in (json.loads(p.read_text()) for p in (tmp_path / "run/jobs").glob("*/results.json"))
                  if r["model"] == "small_cnn")
    job = PPGDataModule(dataset="synthetic", root=str(tmp_path / "data")).job("synthetic-hr", 43, 2, fs=record["fs"])
    job.setup("fit")
    groups = job.view.groups
    assert list(dict.fromkeys(groups[job.split.test].tolist())) == record["test_groups"]
    assert list(dict.fromkeys(groups[job.split.train].tolist())) == record["train_groups"]
    fit, val = job.holdout()
    assert not set(groups[fit]) & set(groups[val]) and set(groups[fit]) | set(groups[val]) == set(record["train_groups"])
    served = np.concatenate([b["index"].numpy() for b in job.test_dataloader()])
    assert np.array_equal(served, job.split.test)  # the test loader serves the outer test rows, in view order


def test_a_regime_subclass_overriding_one_hook_runs_from_its_yaml_under_its_own_name(tmp_path, monkeypatch):
    """examples/encoder_eval_finetune.{py,yaml}: a subclass of the finetune regime and a YAML file, no change to
    ppgbench. The small CNN has BatchNorm and no dropout, so its encoder in eval mode trains exactly as the
    published regime's ``freeze_stats`` BatchNorm mode does, and unlike its ``train`` mode."""
    import json

    from ppgbench_pl.cli import main

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.chdir(ROOT)  # the regime's module is found from the project folder, as the example says
    common = tiny_fit_args(tmp_path)
    search = '"search": {"n_trials": 2, "n_startup_trials": 2, "max_epochs": 2, "parallel_trials": 2}'

    def callbacks(class_path: str, mode: str) -> str:
        space = f'"search_space": {{"batch_size": [16], "batchnorm_mode": ["{mode}"]}}, "subject_repeats": 1'
        return f'[{{"class_path": "{class_path}", "init_args": {{{search}, {space}}}}}]'

    runs = {"variant": callbacks("examples.encoder_eval_finetune.EncoderEvalFinetune", "train"),
            "freeze_stats": callbacks("ppgbench_pl.regimes.finetune.FinetuneRegime", "freeze_stats"),
            "train": callbacks("ppgbench_pl.regimes.finetune.FinetuneRegime", "train")}
    for name, regime in runs.items():
        main(["fit", "--config", str(ROOT / "configs/regime_finetune.yaml"), "--config",
              str(ROOT / "examples/encoder_eval_finetune.yaml"), "--output_dir", str(tmp_path / name), *common,
              "--trainer.callbacks", regime])
    records = {name: next(r for r in (json.loads(p.read_text()) for p in (tmp_path / name / "jobs").glob("*/results.json"))
                          if r["model"] == "small_cnn") for name in runs}
    assert records["variant"]["status"] == "ok" and records["variant"]["regime"] == "finetune_encoder_eval"
    assert records["train"]["regime"] == "finetune"
    assert "EncoderEvalFinetune" in (tmp_path / "variant" / "run.json").read_text()
    curves = {name: [t["intermediate_values"] for t in r["results"][0]["optuna"]["trials"]]
              for name, r in records.items()}
    assert curves["variant"] == curves["freeze_stats"] and curves["variant"] != curves["train"]
    # The YAML as a user runs it (its callbacks were replaced above to keep the search tiny) builds this regime.
    import yaml

    from examples.encoder_eval_finetune import EncoderEvalFinetune

    (entry,) = yaml.safe_load((ROOT / "examples/encoder_eval_finetune.yaml").read_text())["trainer"]["callbacks"]
    assert entry["class_path"] == "examples.encoder_eval_finetune.EncoderEvalFinetune"
    assert EncoderEvalFinetune(**entry["init_args"]).search_space == {"batchnorm_mode": ["freeze_stats"]}
