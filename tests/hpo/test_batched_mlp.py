from dataclasses import replace

import lightning as L
import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo import batched_mlp
from ppgbench_pl.hpo.batched_mlp import (
    DropoutStream,
    HeadConfig,
    HeadData,
    StackedHeads,
    plan_epoch,
    stack_ids,
    train_heads,
)
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


def _trainer(callbacks):
    """The reference trial's Trainer: CPU, EPOCHS epochs, nothing logged or saved."""
    return L.Trainer(callbacks=callbacks, max_epochs=EPOCHS, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                     accelerator="cpu")


def _reference(config, x, y, xv, n_out, loss, weight):
    """The Lightning loop: EncoderTask on cached embeddings, one Trainer.fit."""
    L.seed_everything(config.seed, verbose=False)
    task = EncoderTask(nn.Identity(), head=MLPHead(D, n_out, config.hidden_dim, config.dropout), loss=loss,
                       head_lr=config.lr, head_weight_decay=config.weight_decay, class_weight=weight)
    train = DataLoader(ArrayDataset(z=x, y=y), batch_size=config.batch_size,
                       sampler=EpochPermutationSampler(len(x), config.seed))
    val = DataLoader(ArrayDataset(z=xv, y=np.zeros((len(xv), *y.shape[1:]), dtype=y.dtype)), batch_size=4096)

    history = []
    outcome = fit_trial(_trainer, task, train, val, lambda out: history.append(_score(out)) or history[-1], None,
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


def test_epoch_plan_covers_every_batch():
    x, y, _, _, weight = _problem("ce")
    data = HeadData(torch.tensor(x), torch.tensor(y), None, "ce", 3, torch.tensor(weight))
    configs = [HeadConfig(4, 0.0, 1e-2, 0.0, 32, 1), HeadConfig(4, 0.0, 1e-2, 0.0, 32, 2)]
    plan = plan_epoch(data, configs, epoch=1)
    assert plan.rows.shape == plan.scale.shape == (2, N)
    for t, config in enumerate(configs):
        batches = epoch_batches(N, config.batch_size, config.seed, 1)
        assert plan.rows[t].tolist() == np.concatenate(batches).tolist()
        factors = np.concatenate([np.full(len(b), 1 / np.asarray(weight)[y[b]].sum()) for b in batches])
        np.testing.assert_allclose(plan.scale[t].numpy(), factors, rtol=1e-6)  # 1 / the batch's weight sum


def test_heads_with_dropout_train_as_they_would_alone():
    """Dropout masks come from each trial's own stream: a stack changes nothing, whatever it holds."""
    x, y, xv, n_out, weight = _problem("bce")
    configs = [HeadConfig(8, 0.3, 1e-2, 0.0, 16, 1), HeadConfig(16, 0.0, 1e-3, 0.1, 16, 2),
               HeadConfig(16, 0.3, 5e-3, 0.0, 16, 3), HeadConfig(8, 0.3, 1e-2, 0.0, 32, 4)]
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), "bce", n_out, torch.tensor(weight))
    together = train_heads(data, configs, EPOCHS, lambda i, out: _score(out))
    for i, config in enumerate(configs):
        (alone,) = train_heads(data, [config], EPOCHS, lambda i, out: _score(out))
        assert together[i].best_epoch == alone.best_epoch
        assert together[i].value == pytest.approx(alone.value, abs=1e-6)
        for key, value in alone.weights.items():
            torch.testing.assert_close(together[i].weights[key], value, atol=1e-6, rtol=1e-5)
    (other_seed,) = train_heads(data, [replace(configs[0], seed=9)], EPOCHS, lambda i, out: _score(out))
    assert not torch.equal(other_seed.weights["net.1.weight"], together[0].weights["net.1.weight"])


def test_dropout_masks_keep_one_minus_p_and_ignore_chunking():
    masks = DropoutStream(seed=3, epoch=2, width=50, p=0.3).next(400)
    assert masks.shape == (400, 50) and masks.dtype == np.float32
    assert np.unique(masks).tolist() == [0.0, pytest.approx(1 / 0.7)]
    assert (masks > 0).mean() == pytest.approx(0.7, abs=0.01)
    stream = DropoutStream(seed=3, epoch=2, width=50, p=0.3)
    np.testing.assert_array_equal(np.concatenate([stream.next(100), stream.next(38), stream.next(262)]), masks)
    other = DropoutStream(seed=3, epoch=3, width=50, p=0.3).next(400)
    assert (other != masks).any()


def test_chunked_epochs_and_evaluation_equal_whole_ones(monkeypatch):
    x, y, xv, n_out, _ = _problem("mse")
    configs = [HeadConfig(8, 0.3, 1e-2, 0.0, 16, 1), HeadConfig(8, 0.0, 1e-3, 0.0, 16, 2),
               HeadConfig(16, 0.3, 1e-3, 0.0, 32, 3)]
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), "mse", n_out)
    outputs: list[list[np.ndarray]] = [[], []]
    whole = train_heads(data, configs, 2, lambda i, out: outputs[0].append(out) or _score(out))
    monkeypatch.setattr(batched_mlp, "CHUNK_ELEMENTS", 1)  # one chunk of two batches at a time
    monkeypatch.setattr(batched_mlp, "EVAL_ELEMENTS", 1)  # one validation row at a time
    chunked = train_heads(data, configs, 2, lambda i, out: outputs[1].append(out) or _score(out))
    for a, b in zip(whole, chunked, strict=True):
        for key, value in a.weights.items():
            torch.testing.assert_close(b.weights[key], value, atol=1e-6, rtol=1e-5)
    for a, b in zip(*outputs, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)


def test_reports_come_in_input_order_whatever_the_stacks():
    x, y, xv, n_out, _ = _problem("mse")
    configs = [HeadConfig(8, 0.0, 1e-2, 0.0, 64, 1), HeadConfig(16, 0.3, 1e-3, 0.0, 16, 2),
               HeadConfig(8, 0.0, 1e-2, 0.0, 16, 3), HeadConfig(16, 0.0, 1e-3, 0.0, 64, 4)]
    assert stack_ids(configs) == [[2], [1], [0], [3]]  # one stack per (batch size, width), not in input order
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), "mse", n_out)
    seen: list[tuple[int, int]] = []
    train_heads(data, configs, EPOCHS, lambda i, out: _score(out),
                lambda i, epoch, best: seen.append((epoch, i)) is None and False)
    assert seen == [(epoch, i) for epoch in range(EPOCHS) for i in range(4)]


def test_stacks_hold_one_batch_size_and_width_unless_padding_is_asked_for():
    configs = [HeadConfig(256, 0.0, 1e-3, 0.0, 16, 1), HeadConfig(512, 0.3, 1e-3, 0.0, 16, 2),
               HeadConfig(256, 0.0, 1e-3, 0.0, 32, 3), HeadConfig(256, 0.3, 1e-3, 0.0, 16, 4)]
    assert stack_ids(configs) == [[3, 0], [1], [2]]
    assert stack_ids(configs, pad_widths=True) == [[1, 3, 0], [2]]
    apart = [HeadConfig(64, 0.0, 1e-3, 0.0, 16, 1), HeadConfig(512, 0.0, 1e-3, 0.0, 16, 2)]
    assert stack_ids(apart, pad_widths=True) == [[0], [1]]  # padding would more than double the work


def test_padded_stacks_train_as_heads_alone():
    """Narrower heads zero-padded into a wider stack (the GPU's choice) train as they would alone."""
    x, y, xv, n_out, weight = _problem("ce")
    configs = [HeadConfig(8, 0.3, 1e-2, 0.0, 16, 1), HeadConfig(16, 0.0, 1e-3, 0.1, 16, 2),
               HeadConfig(12, 0.3, 5e-3, 0.0, 16, 3)]
    data = HeadData(torch.tensor(x), torch.tensor(y), torch.tensor(xv), "ce", n_out, torch.tensor(weight))
    xn = torch.nn.functional.layer_norm(data.x_fit, (D,))
    ordered = [configs[i] for i in stack_ids(configs, pad_widths=True)[0]]
    stack = StackedHeads(ordered, D, n_out, torch.device("cpu"))
    alone = [StackedHeads([c], D, n_out, torch.device("cpu")) for c in ordered]
    for epoch in range(2):
        stack.train_epoch(xn, data, epoch)
        for heads in alone:
            heads.train_epoch(xn, data, epoch)
    for t, heads in enumerate(alone):
        for key, value in heads.head_state(0, best=False).items():
            torch.testing.assert_close(stack.head_state(t, best=False)[key], value, atol=1e-6, rtol=1e-5)


def test_the_unfused_optimiser_path_equals_the_fused_kernel():
    """Devices without the fused AdamW kernel take torch's single-tensor AdamW: the same steps."""
    x, y, _, n_out, _ = _problem("mse")
    configs = [HeadConfig(8, 0.0, 1e-2, 0.1, 16, 1), HeadConfig(8, 0.0, 1e-3, 0.0, 16, 2)]
    data = HeadData(torch.tensor(x), torch.tensor(y), None, "mse", n_out)
    xn = torch.nn.functional.layer_norm(data.x_fit, (D,))
    fused, plain = (StackedHeads(configs, D, n_out, torch.device("cpu")) for _ in range(2))
    plain.fused = False
    for epoch in range(2):
        fused.train_epoch(xn, data, epoch)
        plain.train_epoch(xn, data, epoch)
    for t in range(2):
        for key, value in fused.head_state(t, best=False).items():
            torch.testing.assert_close(plain.head_state(t, best=False)[key], value, atol=1e-6, rtol=1e-5)


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

    outcome = fit_trial(_trainer, task, train, val, lambda out: score(0, out), None)
    assert outcome.state == "complete" and outcome.best_epoch == 1 and outcome.value == 0.5
    assert outcome.weights is not None and outcome.epochs_run == 2
