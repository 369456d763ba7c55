"""Lightning's own callbacks, unchanged, in every trial: each trial is a ``TrialModule`` fitted on its own.

Each callback is subclassed only to record what it did in each trial's fit (the copies of one callback share
the class's record); its behaviour is Lightning's. Each test runs the same tiny search with and without the
callback: the callback acts in every trial and changes the search.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from lightning.pytorch.callbacks import BackboneFinetuning, EarlyStopping, StochasticWeightAveraging
from torch import nn

from ppgbench_pl.hpo.optuna_search import SearchSettings
from ppgbench_pl.regimes.finetune import FinetuneRegime
from ppgbench_pl.regimes.mlp import MLPRegime
from tests.regimes.neural_helpers import (
    context,
    one_thread,  # noqa: F401 - the autouse fixture
    small_cnn_data,
)

ROOT = Path(__file__).resolve().parents[2]
SEARCH = SearchSettings(n_trials=3, n_startup_trials=3, max_epochs=2, parallel_trials=3)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return small_cnn_data(tmp_path_factory.mktemp("stock_data"), synthetic_subjects=10, synthetic_windows=4)


def _run(regime, data, work: Path, callbacks: list) -> tuple[dict, dict[str, list[float]]]:
    """One job of synthetic-hr (seed 42, fold 0): its outcome's details and each trial's validation curve."""
    dm, encoder, emb = data
    ctx = context(dm, encoder, "synthetic-hr", work, embeddings=emb)
    ctx.callbacks = callbacks
    (outcome,) = regime.run(ctx)
    curves = {f"{ctx.job_id}/repeat0/{t['number']}": list(t["intermediate_values"].values())
              for t in outcome.details["optuna"]["trials"]}
    return outcome.details, curves


class RecordedBackbone(BackboneFinetuning):
    """Lightning's BackboneFinetuning; records, per trial and epoch, whether the backbone trains."""

    seen: ClassVar[list[tuple[str, int, bool, int]]] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        # train_bn=True (the default) keeps BatchNorm trainable while the rest of the backbone is frozen
        backbone = [p for m in pl_module.backbone.modules() if not isinstance(m, nn.modules.batchnorm._BatchNorm)
                    for p in m.parameters(recurse=False)]
        in_optimizer = {id(p) for g in trainer.optimizers[0].param_groups for p in g["params"]}
        trains = all(p.requires_grad and id(p) in in_optimizer for p in backbone)
        assert trains or not any(id(p) in in_optimizer or p.requires_grad for p in backbone)
        self.seen.append((pl_module.slot.name, trainer.current_epoch, trains, len(trainer.optimizers[0].param_groups)))


def test_backbone_finetuning_freezes_each_trials_encoder_until_its_epoch(data, tmp_path):
    regime = FinetuneRegime(SEARCH, subject_repeats=1, search_space={"batch_size": [16]})
    RecordedBackbone.seen = []
    details, curves = _run(regime, data, tmp_path / "bf", [RecordedBackbone(unfreeze_backbone_at_epoch=1)])
    _, plain = _run(regime, data, tmp_path / "plain", [])
    assert details["callbacks"] == ["RecordedBackbone"] and "trial_fits" in details
    expected = [(name, epoch, epoch >= 1, 2 + (epoch >= 1)) for name, curve in curves.items()
                for epoch in range(len(curve))]
    # frozen (the head's group and the BatchNorm part of the encoder's), then the backbone's own group
    assert sorted(RecordedBackbone.seen) == sorted(expected)
    assert len(curves) == len(plain) == 3
    for mine, theirs in zip(curves.values(), plain.values(), strict=True):  # trial by trial
        assert mine[0] != theirs[0]  # the first epoch trains the head alone


class RecordedSWA(StochasticWeightAveraging):
    """Lightning's StochasticWeightAveraging; records, per trial, its learning rates and the averages it took."""

    seen: ClassVar[list[tuple[str, int, float]]] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        (group,) = trainer.optimizers[0].param_groups
        self.seen.append((pl_module.slot.name, int(self.n_averaged or 0), group["lr"]))


def test_stochastic_weight_averaging_runs_in_every_mlp_trial(data, tmp_path):
    regime = MLPRegime(SEARCH, subject_repeats=1, search_space={"batch_size": [16], "lr": [1e-3]})
    RecordedSWA.seen = []
    details, curves = _run(regime, data, tmp_path / "swa", [RecordedSWA(swa_lrs=0.05, swa_epoch_start=1,
                                                                         annealing_epochs=1)])
    _, plain = _run(regime, data, tmp_path / "plain", [])
    assert details["callbacks"] == ["RecordedSWA"]
    # every trial's own SWA: an average per epoch, SWALR's rate from its first epoch's end
    assert sorted(RecordedSWA.seen) == sorted((name, epoch + 1, 0.05) for name in curves for epoch in range(2))
    for mine, theirs in zip(curves.values(), plain.values(), strict=True):  # trial by trial
        assert mine[0] == pytest.approx(theirs[0], rel=1e-9) and mine[1] != theirs[1]  # epoch 2 at SWA's rate


class RecordedStop(EarlyStopping):
    """Lightning's EarlyStopping on the trial's ``val_score``; records where it stopped each trial."""

    seen: ClassVar[list[tuple[str, int]]] = []

    def on_train_end(self, trainer, pl_module) -> None:
        self.seen.append((pl_module.slot.name, self.stopped_epoch))


def test_early_stopping_on_the_trials_val_score_ends_each_trial_alone(data, tmp_path):
    search = SearchSettings(n_trials=3, n_startup_trials=3, max_epochs=4, parallel_trials=3, min_resource=4)
    regime = MLPRegime(search, subject_repeats=1, search_space={"batch_size": [16]})
    RecordedStop.seen = []
    # an improvement must exceed 1e6, so every trial stops at its second epoch (patience 0)
    details, curves = _run(regime, data, tmp_path / "stop", [RecordedStop(monitor="val_score", mode="max",
                                                                          min_delta=1e6, patience=0)])
    _, plain = _run(regime, data, tmp_path / "plain", [])
    assert sorted(RecordedStop.seen) == sorted((name, 1) for name in curves)
    assert all(len(curve) == 2 for curve in curves.values()) and all(len(c) == 4 for c in plain.values())
    trials = details["optuna"]["trials"]
    assert all(t["state"] == "COMPLETE" and t["user_attrs"]["epochs_run"] == 2 for t in trials)
    assert details["winner"]["best_epoch"] <= 2
    for mine, theirs in zip(curves.values(), plain.values(), strict=True):
        assert mine == pytest.approx(theirs[:2], rel=1e-9)  # the same trial, cut short


def test_mlp_trial_module_has_an_identity_backbone_and_the_head(data, tmp_path):
    from ppgbench_pl.hpo.per_trial import TrialModule

    seen = []

    class Look(BackboneFinetuning):
        def on_fit_start(self, trainer, pl_module):
            super().on_fit_start(trainer, pl_module)
            seen.append((type(pl_module.backbone), type(pl_module.head).__name__, len(list(pl_module.parameters())),
                         isinstance(pl_module, TrialModule)))

    regime = MLPRegime(SearchSettings(n_trials=1, n_startup_trials=1, max_epochs=1), subject_repeats=1)
    _run(regime, data, tmp_path / "look", [Look()])
    (backbone, head, n_params, is_trial), = seen
    assert backbone is nn.Identity and head == "MLPHead" and n_params == 6 and is_trial


@pytest.mark.parametrize("regime, yaml", [("finetune", "backbone_finetuning.yaml"), ("mlp", "swa_mlp.yaml")])
def test_a_stock_callback_from_the_command_line_is_named_in_the_records_and_the_identity(tmp_path, monkeypatch, capsys,
                                                                                         regime, yaml):
    from ppgbench_pl.cli import main

    monkeypatch.setenv("WANDB_MODE", "disabled")
    common = ["--data.init_args.root", str(tmp_path / "data"), "--data.init_args.tasks", "[synthetic-hr]",
              "--data.init_args.synthetic_subjects", "8", "--data.init_args.synthetic_windows", "4",
              "--controls", "[]", "--trainer.accelerator", "cpu", "--progress", "false"]
    main(["fit", "--config", str(ROOT / f"configs/regime_{regime}.yaml"), "--config", str(ROOT / "examples" / yaml),
          "--config", str(ROOT / "configs/budget/smoke.yaml"), "--output_dir", str(tmp_path / "run"), *common])
    lines = [line for line in capsys.readouterr().err.splitlines() if "not stack-aware" in line]
    assert len(lines) == 1 and "each trial of the mlp and finetune regimes trains in its own Trainer.fit" in lines[0]
    record = next(r for r in (json.loads(p.read_text()) for p in (tmp_path / "run/jobs").glob("*/results.json"))
                  if r["model"] == "small_cnn")
    name = {"finetune": "BackboneFinetuning", "mlp": "StochasticWeightAveraging"}[regime]
    (path,) = record["callbacks"]  # the class path Lightning's module gives it
    assert record["status"] == "ok" and path.startswith("lightning.pytorch.callbacks.") and path.endswith(name)
    assert f"callback={path}" in record["deviations"]
    assert record["results"][0]["trial_fits"].startswith("one Trainer.fit per trial")
    assert name in (tmp_path / "run/run.json").read_text()
