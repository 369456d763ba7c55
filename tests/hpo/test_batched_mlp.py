import lightning as L
import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.batched_mlp import HeadConfig, HeadData, plan_epoch, train_heads
from ppgbench_pl.hpo.lightning_trial import fit_trial
from ppgbench_pl.hpo.shuffle import EpochPermutationSampler, epoch_batches, epoch_permutation
from ppgbench_pl.tasks.encoder_task import EncoderTask
from tests.regimes.neural_helpers import OneThread

N, NV, D, EPOCHS = 90, 30, 12, 3


@pytest.fixture(autouse=True)
def one_thread():
    with OneThread():
        yield


def _problem(loss: str):
    rng = np.random.default_rng(0)
    x, xv = rng.normal(size=(N, D)).astype(np.float32), rng.normal(size=(NV, D)).astype(np.float32)
    if loss == "mse":
        y = np.stack([x[:, 0] * 3 + 50, x[:, 1] - x[:, 2]], axis=1).astype(np.float32)
        return x, y, xv, 2, None
    if loss == "bce":
        return x, (x[:, 0] > 0.5).astype(np.float32), xv, 1, [2.5]
    return x, np.digitize(x[:, 0], [-0.5, 0.5]).astype(np.int64), xv, 3, [0.5, 1.0, 2.0]


def _score(out: np.ndarray) -> float:
    return float(np.mean(out))  # any deterministic function of the outputs will do


def _reference(config, x, y, xv, n_out, loss, weight):
    """The Lightning loop: EncoderTask on cached embeddings, one Trainer.fit."""
    L.seed_everything(config.seed, verbose=False)
    task = EncoderTask(nn.Identity(), head=MLPHead(D, n_out, config.hidden_dim, config.dropout), loss=loss,
                       head_lr=config.lr, head_weight_decay=config.weight_decay, class_weight=weight)
    train = DataLoader(ArrayDataset(z=x, y=y), batch_size=config.batch_size,
                       sampler=EpochPermutationSampler(len(x), config.seed))
    val = DataLoader(ArrayDataset(z=xv, y=np.zeros((len(xv), *y.shape[1:]), dtype=y.dtype)), batch_size=4096)

    def trainer(callbacks):
        return L.Trainer(callbacks=callbacks, max_epochs=EPOCHS, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         accelerator="cpu")

    history = []
    outcome = fit_trial(trainer, task, train, val, lambda out: history.append(_score(out)) or history[-1], None,
                        snapshot=lambda m: {k: v.clone() for k, v in m.head.state_dict().items()})
    return outcome, history


@pytest.mark.parametrize("loss", ["mse", "bce", "ce"])
def test_batched_engine_equals_the_lightning_reference(loss):
    x, y, xv, n_out, weight = _problem(loss)
    configs = [HeadConfig(16, 0.0, 1e-2, 0.0, 16, 11), HeadConfig(8, 0.0, 5e-3, 0.1, 64, 12),
               HeadConfig(16, 0.0, 1e-3, 0.0, 32, 13)]
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), loss, n_out,
                    torch.tensor(weight) if weight else None)
    reports: dict[int, list[float]] = {}
    outcomes = train_heads(data, configs, EPOCHS, lambda i, out: _score(out),
                           lambda i, epoch, best: reports.setdefault(i, []).append(best) is None and False)
    for i, config in enumerate(configs):
        ref, history = _reference(config, x, y, xv, n_out, loss, weight)
        got = outcomes[i]
        assert got.state == ref.state == "complete" and got.best_epoch == ref.best_epoch
        assert got.value == pytest.approx(ref.value, abs=1e-5)
        assert reports[i] == pytest.approx(np.maximum.accumulate(history).tolist(), abs=1e-5)  # best so far
        for key, value in ref.weights.items():
            torch.testing.assert_close(got.weights[key], value, atol=2e-5, rtol=1e-4)


def test_heads_train_independently_of_their_stack_mates():
    x, y, xv, n_out, _ = _problem("mse")
    configs = [HeadConfig(4, 0.0, 1e-2, 0.0, 16, 1), HeadConfig(16, 0.3, 1e-3, 0.1, 48, 2),
               HeadConfig(4, 0.0, 5e-3, 0.0, 32, 3)]
    data = HeadData(torch.tensor(x), torch.tensor(y), None, "mse", n_out)
    together = train_heads(data, configs, 2)
    assert [o.weights["net.1.weight"].shape for o in together] == [(4, D), (16, D), (4, D)]
    for i in (0, 2):  # no dropout: a head trained in a stack (micro-batches of 16 rows) = trained alone
        (alone,) = train_heads(data, configs[i : i + 1], 2)
        for key, value in alone.weights.items():
            torch.testing.assert_close(together[i].weights[key], value, atol=1e-6, rtol=1e-5)


def test_micro_batches_cover_every_batch():
    x, y, _, _, weight = _problem("ce")
    data = HeadData(torch.tensor(x), torch.tensor(y), None, "ce", 3, torch.tensor(weight))
    configs = [HeadConfig(4, 0.0, 1e-2, 0.0, 32, 1), HeadConfig(4, 0.0, 1e-2, 0.0, 48, 2)]
    plan = plan_epoch(data, configs, 16, epoch=1)
    assert plan.rows.shape == (2, 6, 16) and plan.steps.sum(1).tolist() == [3, 2]  # ceil(90/32), ceil(90/48)
    for t, config in enumerate(configs):
        batches = epoch_batches(N, config.batch_size, config.seed, 1)
        ends = np.cumsum([len(b) for b in batches])
        assert np.flatnonzero(plan.steps[t]).tolist() == [int(np.ceil(e / 16)) - 1 for e in ends]
        rows = plan.rows[t].reshape(-1)
        assert rows[:N].tolist() == np.concatenate(batches).tolist() and (rows[N:] == -1).all()
        first = batches[0]
        assert plan.norm[t, 0].item() == pytest.approx(np.asarray(weight)[y[first]].sum())


def test_divergence_and_pruning_stay_with_their_trial():
    x, y, xv, n_out, _ = _problem("mse")
    configs = [HeadConfig(8, 0.0, 1e30, 0.0, 16, 1), HeadConfig(8, 0.0, 1e-2, 0.0, 32, 2),
               HeadConfig(8, 0.0, 1e-2, 0.0, 16, 3)]
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), "mse", n_out)
    seen: list[tuple[int, int]] = []

    def on_epoch(i, epoch, best):
        seen.append((i, epoch))
        return i == 2 and epoch == 1

    failed, complete, pruned = train_heads(data, configs, EPOCHS, lambda i, out: _score(out), on_epoch)
    assert failed.state == "failed" and "non-finite training loss" in failed.failure and "epoch 1" in failed.failure
    assert complete.state == "complete" and complete.epochs_run == EPOCHS and np.isfinite(complete.value)
    assert pruned.state == "pruned" and pruned.epochs_run == 2
    assert (0, 0) not in seen and (2, 2) not in seen and (1, 2) in seen


def test_shuffling_is_a_function_of_seed_and_epoch():
    sampler = EpochPermutationSampler(10, seed=5)
    first, second = list(sampler), list(sampler)
    assert first == epoch_permutation(10, 5, 0).tolist() and second == epoch_permutation(10, 5, 1).tolist()
    sampler.set_epoch(0)
    assert list(sampler) == first and first != second and sorted(first) == list(range(10))
    batches = epoch_batches(10, 4, 5, 1)
    assert [len(b) for b in batches] == [4, 4, 2] and np.concatenate(batches).tolist() == second


def _nan_at_second_call():
    calls: dict[int, int] = {}

    def score(i: int, out: np.ndarray) -> float:
        calls[i] = calls.get(i, 0) + 1
        return {1: 0.5, 2: float("nan")}.get(calls[i], 9.0)

    return score


def test_batched_trial_that_turns_non_finite_completes_with_its_best_earlier_epoch():
    x, y, xv, n_out, _ = _problem("mse")
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), "mse", n_out)
    reports: list[float] = []
    (outcome,) = train_heads(data, [HeadConfig(8, 0.0, 1e-2, 0.0, 16, 1)], EPOCHS, _nan_at_second_call(),
                             lambda i, epoch, best: reports.append(best) is None and False)
    assert outcome.state == "complete" and outcome.best_epoch == 1 and outcome.value == 0.5
    assert outcome.weights is not None and reports == [0.5] * EPOCHS  # keeps reporting its best, as published


def test_lightning_trial_that_turns_non_finite_completes_with_its_best_earlier_epoch():
    x, y, xv, n_out, _ = _problem("mse")
    config = HeadConfig(8, 0.0, 1e-2, 0.0, 16, 1)
    L.seed_everything(1, verbose=False)
    task = EncoderTask(nn.Identity(), head=MLPHead(D, n_out, 8), loss="mse", head_lr=1e-2)
    train = DataLoader(ArrayDataset(z=x, y=y), batch_size=config.batch_size)
    val = DataLoader(ArrayDataset(z=xv, y=np.zeros((len(xv), n_out), dtype=np.float32)), batch_size=4096)
    score = _nan_at_second_call()

    def trainer(callbacks):
        return L.Trainer(callbacks=callbacks, max_epochs=EPOCHS, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         accelerator="cpu")

    outcome = fit_trial(trainer, task, train, val, lambda out: score(0, out), None)
    assert outcome.state == "complete" and outcome.best_epoch == 1 and outcome.value == 0.5
    assert outcome.weights is not None and outcome.epochs_run == 2
