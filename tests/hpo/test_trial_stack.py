"""The trial engine's contract: a trial trained in a stack is the trial trained alone.

Several studies (2 outer folds x 2 holdout repeats of a subject-level regression task, 2 trials asked
together, batch sizes 16 and 64) are searched once side by side in one ``Trainer.fit`` (8 slots at once)
and once each in a fit of its own. Every trial's per-epoch values, the Hyperband decisions and the
pruner's rung bookkeeping must be the same: with dropout (the MLP head, per-trial dropout streams) and
without (finetuning a small CNN encoder, per-trial BatchNorm). A diverging slot stops alone, a user
callback sees every trial's epochs, and a finetune trial's head never depends on its stack mates.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from optuna.trial import FrozenTrial, TrialState
from torch import nn

from ppgbench_pl.data.registry import get_task
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.optuna_search import (
    FAILURE_ATTR,
    PersistentStudy,
    SearchSettings,
    close_storage,
    counts_toward_budget,
    open_storage,
    storage_url,
)
from ppgbench_pl.hpo.stack_search import StackSearch, StudyPlan, snapshot
from ppgbench_pl.hpo.trial_stack import Slot, SlotData
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.finetune import FinetuneFactory, FinetuneRegime
from ppgbench_pl.regimes.mlp import MLPRegime
from ppgbench_pl.regimes.neural import NeuralRegime
from tests.regimes.neural_helpers import (
    CPU,
    OneThread,
    one_thread,  # noqa: F401 - the autouse fixture
    small_cnn_data,
)

TASK = "synthetic-age"  # subject-level regression: continuous scores, 2 holdout repeats per fold
FOLDS = (0, 1)
REPEATS = 2
SEARCH = SearchSettings(n_trials=6, n_startup_trials=2, max_epochs=4, parallel_trials=2)
FT_SEARCH = SearchSettings(n_trials=4, n_startup_trials=2, max_epochs=3, parallel_trials=2)
MLP_SPACE = {"batch_size": [16, 64], "dropout": [0.3], "hidden_dim": [32]}
FT_SPACE = {"batch_size": [16, 64], "head_dropout": [0.0], "hidden_dim": [16]}
WIDTH = len(FOLDS) * REPEATS * 2  # studies x trials asked together


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return small_cnn_data(tmp_path_factory.mktemp("stack_data"), synthetic_windows=20)


def _ctx(setup, fold: int, root: Path, callbacks: list[Callback] | None = None) -> JobContext:
    """A job of fold ``fold``; its id (hence its studies' names and Hyperband brackets) never depends on ``root``."""
    dm, encoder, emb = setup
    job_id = f"small_cnn__{TASK}__fold{fold}"
    return JobContext.build(dm, encoder, get_task(TASK), 42, fold, root / job_id, job_id=job_id, embeddings=emb,
                            trainer_kwargs=dict(CPU), callbacks=callbacks)


class EpochLog(Callback):
    """A user callback: the slots that trained in each epoch, read from the stack the trainer fits."""

    ppgbench_stack_aware = True  # it walks the stack's slots

    def __init__(self) -> None:
        self.epochs: list[list[str]] = []
        self.starts: list[list[str]] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.starts.append(list(pl_module.epoch_slots))

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.epochs.append(list(pl_module.epoch_slots))

    @property
    def counts(self) -> Counter:
        return Counter(name for names in self.epochs for name in names)


def _search(regime: NeuralRegime, root: Path, setup, stacked: bool,
            callbacks: list[Callback] | None = None) -> dict[str, list[FrozenTrial]]:
    """Every study of both folds: all in one stacked fit, or each in its own fit. Trials per study key."""
    ctxs = [_ctx(setup, fold, root, callbacks) for fold in FOLDS]
    searches = [regime.repeat_search(ctx, k) for ctx in ctxs for k in range(REPEATS)]
    try:
        if stacked:
            regime.fit_stack(ctxs[0], StackSearch([regime.open_plan(s) for s in searches]))
        else:
            for s in searches:
                regime.fit_stack(s.ctx, StackSearch([regime.open_plan(s)]))
        return {s.key: s.study.study.get_trials(deepcopy=True) for s in searches}
    finally:
        for s in searches:
            if s.storage is not None:
                close_storage(s.storage)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-6, abs=1e-12)
    return a == b


def _assert_same_search(stacked: Mapping[str, list[FrozenTrial]], alone: Mapping[str, list[FrozenTrial]]) -> None:
    """Same trials, values per epoch (1e-6 relative), states, pruned set and Hyperband attributes."""
    assert stacked.keys() == alone.keys() and len(stacked) == len(FOLDS) * REPEATS
    for key in stacked:
        a, b = stacked[key], alone[key]
        assert [t.number for t in a] == [t.number for t in b]
        assert {t.number for t in a if t.state == TrialState.PRUNED} == {t.number for t in b if t.state == TrialState.PRUNED}
        for s, t in zip(a, b, strict=True):
            where = f"{key} trial {s.number}"
            assert s.params == t.params, where
            assert s.state == t.state, where
            assert s.intermediate_values.keys() == t.intermediate_values.keys(), where
            for epoch, value in s.intermediate_values.items():
                assert value == pytest.approx(t.intermediate_values[epoch], rel=1e-6), f"{where} epoch {epoch}"
            assert (s.value is None) == (t.value is None) and (s.value is None or _close(s.value, t.value)), where
            assert s.system_attrs.keys() == t.system_attrs.keys(), where
            assert all(_close(v, t.system_attrs[k]) for k, v in s.system_attrs.items()), where
            assert s.user_attrs == t.user_attrs, where


def _assert_search_is_informative(trials: Mapping[str, list[FrozenTrial]], n_trials: int) -> None:
    """The comparison covers what it claims: full budgets, both batch sizes, pruning, distinct curves."""
    every = [t for ts in trials.values() for t in ts]
    assert all(len(ts) == n_trials for ts in trials.values())
    assert {t.params["batch_size"] for t in every} == {16, 64}
    assert any(t.state == TrialState.PRUNED for t in every) and any(t.state == TrialState.COMPLETE for t in every)
    assert all(any(k.startswith("completed_rung_") for k in t.system_attrs) for t in every
               if t.state == TrialState.PRUNED)
    first_epochs = {t.intermediate_values[0] for t in every}
    assert len(first_epochs) == len(every)  # no two trials computed the same thing


# -- a. per-trial arithmetic: MLP head with dropout -------------------------------------------------
@pytest.fixture(scope="module")
def mlp_runs(setup, tmp_path_factory):
    root = tmp_path_factory.mktemp("mlp_stack")
    log = EpochLog()
    with OneThread():
        regime = MLPRegime(SEARCH, subject_repeats=REPEATS, search_space=MLP_SPACE, standardize_targets=True)
        stacked = _search(regime, root / "stacked", setup, stacked=True, callbacks=[log])
        alone_log = EpochLog()
        alone = _search(regime, root / "alone", setup, stacked=False, callbacks=[alone_log])
    return stacked, alone, log, alone_log


def test_mlp_trials_with_dropout_are_the_same_stacked_or_alone(mlp_runs):
    stacked, alone, log, alone_log = mlp_runs
    assert max(len(names) for names in log.epochs) == WIDTH  # 8 slots trained side by side
    assert max(len(names) for names in alone_log.epochs) == SEARCH.parallel_trials
    assert all(t.params["dropout"] == 0.3 for ts in stacked.values() for t in ts)
    _assert_search_is_informative(stacked, SEARCH.n_trials)
    _assert_same_search(stacked, alone)


# -- c. a user callback sees every trial's epochs ----------------------------------------------------
def test_user_callback_sees_every_epoch_of_every_trial(mlp_runs):
    stacked, _, log, _ = mlp_runs
    counts = log.counts
    expected = {f"{key}/{t.number}": len(t.intermediate_values) for key, trials in stacked.items() for t in trials}
    assert len(expected) == len(FOLDS) * REPEATS * SEARCH.n_trials
    assert dict(counts) == expected  # once per epoch trained, for every study's every trial, and nothing else
    assert log.starts == log.epochs  # already right in on_train_epoch_start (was the previous epoch's list)
    assert all(len(names) == len(set(names)) for names in log.epochs)
    seen = {name: [i for i, names in enumerate(log.epochs) if name in names] for name in expected}
    assert all(epochs == list(range(epochs[0], epochs[0] + len(epochs))) for epochs in seen.values())
    for key, trials in stacked.items():  # lockstep: a study's next batch starts the epoch after its batch ended
        batches = [trials[i:i + SEARCH.batch] for i in range(0, len(trials), SEARCH.batch)]
        assert all(seen[f"{key}/{t.number}"][0] == 0 for t in batches[0])
        for before, after in zip(batches, batches[1:], strict=False):
            last = max(seen[f"{key}/{t.number}"][-1] for t in before)
            assert all(seen[f"{key}/{t.number}"][0] == last + 1 for t in after), key


# -- a. + d. finetuning a small CNN (dropout-free); heads under reseed_head=False -------------------
@pytest.fixture(scope="module")
def finetune_runs(setup, tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune_stack")
    heads: dict[str, dict[str, dict[str, torch.Tensor]]] = {"stacked": {}, "alone": {}}
    original = FinetuneFactory.slot
    current: dict[str, dict[str, torch.Tensor]] = {}

    def recording(self, name, params, seed, epochs, validate):
        slot = original(self, name, params, seed, epochs, validate)
        assert name not in current, f"slot {name} built twice"
        current[name] = {k: v.detach().clone() for k, v in slot.net.head.state_dict().items()}
        return slot

    log = EpochLog()
    with OneThread(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(FinetuneFactory, "slot", recording)
        regime = FinetuneRegime(FT_SEARCH, subject_repeats=REPEATS, search_space=FT_SPACE, standardize_targets=True)
        assert regime.reseed_head is False
        runs = {}
        for mode in ("stacked", "alone"):
            current = heads[mode]
            runs[mode] = _search(regime, root / mode, setup, stacked=mode == "stacked",
                                 callbacks=[log] if mode == "stacked" else None)
    return runs["stacked"], runs["alone"], heads, log


def test_finetuned_cnn_trials_are_the_same_stacked_or_alone(finetune_runs):
    stacked, alone, _, log = finetune_runs
    assert max(len(names) for names in log.epochs) == WIDTH
    every = [t for ts in stacked.values() for t in ts]
    assert {t.params["batchnorm_mode"] for t in every} == {"train", "freeze_stats"}
    _assert_search_is_informative(stacked, FT_SEARCH.n_trials)
    _assert_same_search(stacked, alone)


def test_finetune_heads_do_not_depend_on_stack_mates(finetune_runs):
    stacked, _, heads, _ = finetune_runs
    names = {f"{key}/{t.number}" for key, trials in stacked.items() for t in trials}
    assert set(heads["stacked"]) == set(heads["alone"]) == names
    for name in sorted(names):
        a, b = heads["stacked"][name], heads["alone"][name]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    # the heads are drawn, not all alike: trials of a study, and the same trial of different studies, differ
    for key in stacked:
        first, second = heads["stacked"][f"{key}/0"], heads["stacked"][f"{key}/1"]
        assert any(not torch.equal(first[k], second[k]) for k in first)
    keys = sorted(stacked)
    assert any(not torch.equal(heads["stacked"][f"{keys[0]}/0"][k], heads["stacked"][f"{keys[1]}/0"][k])
               for k in heads["stacked"][f"{keys[0]}/0"])


# -- b. a diverging slot -------------------------------------------------------------------------------
class Poisoned(nn.Module):
    """A head whose outputs become NaN from its ``after + 1``-th training forward on.

    It keeps a copy of its parameters as they were when it first diverged, and counts training forwards.
    """

    def __init__(self, head: nn.Module, after: int) -> None:
        super().__init__()
        self.head, self.after, self.calls = head, after, 0
        self.at_divergence: dict[str, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.head(x)
        if self.training:
            self.calls += 1
            if self.calls > self.after:
                if self.at_divergence is None:
                    self.at_divergence = snapshot(self)
                out = out * math.nan
        return out


def _toy_data(seed: int) -> tuple[SlotData, np.ndarray]:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 1, generator=gen)
    x_fit, x_val = torch.randn(48, 4, generator=gen), torch.randn(16, 4, generator=gen)
    y_fit = (x_fit @ w)[:, 0] + 0.1 * torch.randn(48, generator=gen)
    y_val = (x_val @ w)[:, 0]
    return SlotData(x_fit, y_fit, x_val, "mse"), y_val.numpy().astype(np.float64)


class ToyStudy:
    """A hand-built study plan of MLP heads on toy regression rows (48 fit rows, batch 16: 3 steps per epoch)."""

    def __init__(self, root: Path, key: str, poison: Mapping[int, int] | None = None, prune: bool = True,
                 n_trials: int = 2) -> None:
        settings = SearchSettings(n_trials=n_trials, n_startup_trials=2, max_epochs=3, parallel_trials=2).resolved(3, 2)
        self.storage = open_storage(storage_url(None, root / key, key, 0))
        self.study = PersistentStudy(self.storage, key, settings, seed=3)
        if not prune:
            self.study.study.pruner = optuna.pruners.NopPruner()
        self.data, y_val = _toy_data(11)
        self.poison, self.nets, self.completed = dict(poison or {}), {}, []

        def make_slot(k: str, number: int, params: Mapping[str, Any]) -> Slot:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(100 + number)
                net: nn.Module = MLPHead(4, 1, 8, 0.0)
            if number in self.poison:
                net = Poisoned(net, self.poison[number])
            self.nets[number] = net
            group = {"params": list(net.parameters()), "lr": float(params["lr"]), "weight_decay": 0.0}
            return Slot(f"{k}/{number}", net, self.data, int(params["batch_size"]), 100 + number, [group], 3)

        def score(out: np.ndarray, params: Mapping[str, Any]) -> float:
            return -float(np.abs(out[:, 0] - y_val).mean())

        self.plan = StudyPlan(key, self.study, {"lr": [3e-2], "batch_size": [16]}, make_slot, score, 3,
                              on_complete=lambda number, value, weights: self.completed.append((number, value)))

    def trials(self) -> list[FrozenTrial]:
        return self.study.study.get_trials(deepcopy=True)

    def close(self) -> None:
        close_storage(self.storage)


def test_a_diverging_slot_stops_alone(setup, tmp_path):
    regime = MLPRegime(SEARCH)
    ctx = _ctx(setup, 0, tmp_path / "ctx")  # only the trainer settings are used

    mates_alone = ToyStudy(tmp_path / "alone", "mates")
    regime.fit_stack(ctx, StackSearch([mates_alone.plan]))
    # trial 0 diverges at the 2nd step of epoch 2 (one finite epoch), trial 1 at the 2nd step of epoch 1
    bad = ToyStudy(tmp_path / "stacked", "bad", poison={0: 4, 1: 1}, prune=False)
    mates = ToyStudy(tmp_path / "stacked", "mates")
    regime.fit_stack(ctx, StackSearch([bad.plan, mates.plan]))

    kept, failed = bad.trials()
    for number, trial_net in bad.nets.items():
        assert trial_net.calls == bad.poison[number] + 1  # no training forward after the non-finite loss
        assert trial_net.at_divergence is not None
        final = snapshot(trial_net)
        assert all(torch.equal(final[k], v) for k, v in trial_net.at_divergence.items()), f"trial {number} moved"
        assert all(torch.isfinite(v).all() for v in final.values())

    assert kept.state == TrialState.COMPLETE and kept.value == kept.intermediate_values[0]
    assert kept.user_attrs["best_epoch"] == 1 and kept.user_attrs["epochs_run"] == 1
    assert max(kept.intermediate_values.values()) == kept.value and math.isfinite(kept.value)
    assert bad.completed == [(0, kept.value)]
    assert failed.state == TrialState.FAIL and failed.user_attrs[FAILURE_ATTR].startswith("diverged")
    assert failed.user_attrs["epochs_run"] == 1 and failed.intermediate_values == {}
    assert counts_toward_budget(failed) and bad.study.n_finished == 2

    ref = mates_alone.trials()
    got = mates.trials()
    assert [t.state for t in got] == [t.state for t in ref] and len(got) == 2
    for s, t in zip(got, ref, strict=True):
        assert s.intermediate_values.keys() == t.intermediate_values.keys() and len(s.intermediate_values) >= 1
        for epoch, value in s.intermediate_values.items():
            assert value == pytest.approx(t.intermediate_values[epoch], rel=1e-6)
        assert s.system_attrs.keys() == t.system_attrs.keys() and s.user_attrs == t.user_attrs
        assert all(_close(v, t.system_attrs[k]) for k, v in s.system_attrs.items())
    for study in (mates_alone, bad, mates):
        study.close()


# -- a. the arithmetic of one slot is the plain training loop of that trial -------------------------
def _bn_net(seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))


def _plain_loop(net: nn.Module, data: SlotData, batch_size: int, seed: int, lr: float, epochs: int,
                freeze_stats: bool) -> nn.Module:
    """One trial trained by itself: its epoch orders, its dropout stream (seeded with its seed), AdamW."""
    from ppgbench_pl.hpo.trial_stack import epoch_permutation
    from ppgbench_pl.tasks.encoder_task import set_batchnorm_eval

    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-2, fused=True)  # as the stack
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for epoch in range(epochs):
            net.train()
            if freeze_stats:
                set_batchnorm_eval(net)
            order = epoch_permutation(len(data.y_fit), seed, epoch)
            for start in range(0, len(order), batch_size):  # the last batch may be short (drop_last=False)
                index = torch.as_tensor(order[start : start + batch_size])
                loss = torch.nn.functional.mse_loss(net(data.x_fit[index])[:, 0], data.y_fit[index])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    return net


def test_fixed_slots_train_as_their_own_plain_loop(setup, tmp_path):
    """Two slots (dropout, BatchNorm trained or frozen, batch 16 or 64) fitted side by side for 3 epochs."""
    data, _ = _toy_data(5)
    specs = {"a": (16, 21, 1e-2, False), "b": (64, 22, 3e-3, True)}  # batch size, seed, lr, freeze_stats
    slots = []
    for name, (batch_size, seed, lr, freeze) in specs.items():
        net = _bn_net(seed)
        group = {"params": list(net.parameters()), "lr": lr, "weight_decay": 1e-2}
        slots.append(Slot(name, net, data, batch_size, seed, [group], 3, freeze_stats=freeze))
    MLPRegime(SEARCH).fit_stack(_ctx(setup, 0, tmp_path / "ctx"), None, slots)
    assert all(slot.state == "ended" and slot.epoch == 3 for slot in slots)
    for slot, (name, (batch_size, seed, lr, freeze)) in zip(slots, specs.items(), strict=True):
        ref = _plain_loop(_bn_net(seed), data, batch_size, seed, lr, 3, freeze)
        got, want = snapshot(slot.net), snapshot(ref)
        assert got.keys() == want.keys()
        for key in want:  # running BatchNorm statistics included
            assert torch.allclose(got[key].float(), want[key].float(), rtol=1e-5, atol=1e-6), f"slot {name}: {key}"
        untrained = snapshot(_bn_net(seed))
        assert not torch.allclose(got["4.weight"], untrained["4.weight"])
        assert torch.equal(got["1.running_mean"], untrained["1.running_mean"]) == freeze


class EvalAtEpochStart(Callback):
    """A user callback that puts every trial's network in eval mode when its epoch starts (a dropout freeze)."""

    ppgbench_stack_aware = True  # it walks the stack's slots

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        for name in pl_module.epoch_slots:
            pl_module.slots[name].net.eval()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx == 0:
            self.seen.extend(pl_module.slots[name].net.training for name in batch)


def test_a_callbacks_mode_change_at_epoch_start_holds_for_the_epoch(setup, tmp_path):
    """Before, the stack reset every slot's mode after the callbacks' ``on_train_epoch_start``, undoing them."""
    data, _ = _toy_data(5)
    net = _bn_net(21)
    slot = Slot("a", net, data, 16, 21, [{"params": list(net.parameters()), "lr": 1e-2}], 2)
    probe = EvalAtEpochStart()
    MLPRegime(SEARCH).fit_stack(_ctx(setup, 0, tmp_path / "ctx", [probe]), None, [slot])
    assert probe.seen == [False, False]  # each epoch's first batch ran in the callback's eval mode


class EvalTrialsRegime(MLPRegime):
    """A regime variant made by overriding one Lightning hook: every trial trains in eval mode (no dropout)."""

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        for name in pl_module.epoch_slots:
            pl_module.slots[name].net.eval()


def test_a_regime_variant_is_a_subclass_that_overrides_a_hook(setup, tmp_path):
    """The variant's hook acts in the trial: the weights of the same change made by a callback, not the regime's."""
    data, _ = _toy_data(5)

    def trained(regime: NeuralRegime, callbacks: list[Callback]) -> dict[str, torch.Tensor]:
        net = _bn_net(21)
        slot = Slot("a", net, data, 16, 21, [{"params": list(net.parameters()), "lr": 1e-2}], 2)
        regime.fit_stack(_ctx(setup, 0, tmp_path / "ctx", callbacks), None, [slot])
        return snapshot(net)

    variant, by_callback = trained(EvalTrialsRegime(SEARCH), []), trained(MLPRegime(SEARCH), [EvalAtEpochStart()])
    plain = trained(MLPRegime(SEARCH), [])
    assert variant.keys() == by_callback.keys() and all(torch.equal(v, by_callback[k]) for k, v in variant.items())
    assert not torch.equal(variant["4.weight"], plain["4.weight"])
    assert torch.equal(variant["1.running_mean"], snapshot(_bn_net(21))["1.running_mean"])  # eval: stats kept


def test_a_stack_fitted_without_a_neural_regime_is_refused(tmp_path):
    """Its regime ends the trials and sets their modes: without one, a freeze_stats trial would update BatchNorm."""
    import lightning as L

    from ppgbench_pl.hpo.trial_stack import TrialStack

    data, _ = _toy_data(5)
    net = _bn_net(21)
    slot = Slot("a", net, data, 16, 21, [{"params": list(net.parameters()), "lr": 1e-2}], 2, freeze_stats=True)
    trainer = L.Trainer(default_root_dir=tmp_path, accelerator="cpu", max_epochs=-1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(RuntimeError, match="TrialStack: its Trainer needs a neural regime callback"):
        trainer.fit(TrialStack([slot]))


class Interrupt(Callback):
    """A user callback that raises at the end of one epoch (before the search's step: it comes first)."""

    ppgbench_stack_aware = True  # it walks the stack's slots

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch == self.epoch:
            raise RuntimeError("killed")


def test_an_interrupted_stack_abandons_its_running_trials_and_resumes(setup, tmp_path):
    regime = MLPRegime(SEARCH)
    ctx = _ctx(setup, 0, tmp_path / "ctx", callbacks=[Interrupt(epoch=3)])  # the 2nd batch's first epoch
    first = ToyStudy(tmp_path / "run", "toy", n_trials=4)
    with pytest.raises(RuntimeError, match="killed"):
        regime.fit_stack(ctx, StackSearch([first.plan]))
    states = [t.state for t in first.trials()]
    assert states[2:] == [TrialState.FAIL, TrialState.FAIL] and TrialState.RUNNING not in states
    assert all(FAILURE_ATTR not in t.user_attrs for t in first.trials()[2:]) and first.study.n_finished == 2
    durable = optuna.load_study(study_name="toy", storage=first.storage).get_trials(deepcopy=False)
    assert sorted(t.user_attrs["number"] for t in durable) == [0, 1]  # nothing that was running is stored
    first.close()

    resumed = ToyStudy(tmp_path / "run", "toy", n_trials=4)
    assert resumed.study.n_finished == 2 and resumed.study.remaining == 2
    regime.fit_stack(_ctx(setup, 0, tmp_path / "ctx"), StackSearch([resumed.plan]))
    trials = resumed.trials()
    assert resumed.study.n_finished == 4 and sorted(resumed.nets) == [2, 3]  # only the lost batch is retrained
    assert [t.intermediate_values for t in trials[:2]] == [t.intermediate_values for t in first.trials()[:2]]
    resumed.close()


def test_a_fixed_length_retrain_that_diverges_fails_instead_of_returning_stale_weights(setup, tmp_path, monkeypatch):
    from ppgbench_pl.errors import DataError
    from ppgbench_pl.regimes.mlp import HeadFactory, MLPRegime

    regime = MLPRegime(SearchSettings(n_trials=2, n_startup_trials=2, max_epochs=2))
    ctx = _ctx(setup, 0, tmp_path)
    search = regime.repeat_search(ctx, 0)
    original = HeadFactory.slot

    def poisoned(self, name, params, seed, epochs, validate):
        slot = original(self, name, params, seed, epochs, validate)
        slot.net = Poisoned(slot.net, after=2)  # NaN from the third training step on
        slot.groups = [{**g, "params": list(slot.net.parameters())} for g in slot.groups]
        return slot

    monkeypatch.setattr(HeadFactory, "slot", poisoned)
    params = {"hidden_dim": 256, "dropout": 0.0, "lr": 1e-3, "weight_decay": 0.0, "batch_size": 16}
    with pytest.raises(DataError, match="diverged"):
        regime.train_fixed(search, search.factory, params, 42, epochs=3)
