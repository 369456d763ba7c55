import copy
import math
from functools import partial

import lightning as L
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.hpo.lightning_trial import fit_trial, module_state
from ppgbench_pl.hpo.shuffle import EpochPermutationSampler
from ppgbench_pl.hpo.stacked import HeadedEncoder, StackedConfig, StackedData, train_stacked
from ppgbench_pl.tasks.encoder_task import EncoderTask
from tests.regimes.neural_helpers import OneThread

N, NV, T, EMB, HID, EPOCHS = 48, 20, 64, 8, 16, 3
#: Both ways to run a stack; the interleaved one on two worker threads (trial-level parallelism).
MODES = [pytest.param({"mode": "vmap"}, id="vmap"), pytest.param({"mode": "interleaved", "workers": 2}, id="interleaved")]


@pytest.fixture(autouse=True)
def one_thread():
    with OneThread():
        yield


def _problem(loss: str):
    g = torch.Generator().manual_seed(0)
    x, xv = torch.randn(N, T, generator=g) * 2 + 1, torch.randn(NV, T, generator=g)
    if loss == "mse":
        return x, xv, (x[:, :8].mean(1) * 5 + 3).float(), 1, None
    y = (x[:, :4].mean(1) > 1).long() + (x[:, 4:8].mean(1) > 1).long()
    return x, xv, y, 3, [0.5, 1.0, 2.0]


def _mse_data() -> tuple[StackedData, int]:
    """The regression problem, preprocessed as the encoder's training step would."""
    x, xv, y, n_out, _ = _problem("mse")
    pre = SmallCNNEncoder(embed_dim=EMB).preprocess
    return StackedData(pre(x), y, pre(xv), "mse"), n_out


class BiasFreeCNN(SmallCNNEncoder):
    """SmallCNN without conv biases: a bias right before a BatchNorm in train mode gets a gradient of ~0,
    which Adam turns into +-lr steps of rounding noise, so no two implementations agree on it."""

    def __init__(self, seed: int) -> None:
        super().__init__(embed_dim=EMB, seed=seed)
        for module in self.features:
            if isinstance(module, torch.nn.Conv1d):
                module.bias = None


def _net(n_out: int, seed: int, encoder: type = BiasFreeCNN) -> HeadedEncoder:
    torch.manual_seed(seed)
    return HeadedEncoder(encoder(seed=seed), MLPHead(EMB, n_out, HID, 0.0))


def _reference(net: HeadedEncoder, config: StackedConfig, mode: str, x, xv, y, loss, weight):
    """One Lightning Trainer.fit of EncoderTask (finetune mode) on the same init and batches."""
    net = copy.deepcopy(net)
    task = EncoderTask(
        net.encoder,
        mode="finetune",
        head=net.head,
        loss=loss,
        head_lr=config.head_lr,
        encoder_lr_ratio=config.encoder_lr / config.head_lr,
        head_weight_decay=config.head_weight_decay,
        encoder_weight_decay_ratio=(
            config.encoder_weight_decay / config.head_weight_decay if config.head_weight_decay else 1.0
        ),
        batchnorm_mode=mode,
        class_weight=weight,
    )
    ones = np.ones(N, dtype=np.float32)
    train = DataLoader(
        ArrayDataset(x=x.numpy(), ppg_mean=0 * ones, ppg_std=ones, y=y.numpy()),
        batch_size=config.batch_size,
        sampler=EpochPermutationSampler(N, config.seed),
    )
    vones = np.ones(NV, dtype=np.float32)
    val = DataLoader(
        ArrayDataset(x=xv.numpy(), ppg_mean=0 * vones, ppg_std=vones, y=np.zeros(NV, dtype=y.numpy().dtype)),
        batch_size=4096,
    )

    def trainer(callbacks):
        return L.Trainer(
            callbacks=callbacks,
            max_epochs=EPOCHS,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            accelerator="cpu",
        )

    history: list[float] = []
    outcome = fit_trial(
        trainer,
        task,
        train,
        val,
        lambda out: history.append(float(out.mean())) or history[-1],
        None,
        snapshot=module_state,
    )
    return outcome, history


@pytest.mark.parametrize("how", MODES)
@pytest.mark.parametrize(
    ("loss", "mode", "encoder"),
    [
        ("mse", "train", BiasFreeCNN),
        ("ce", "train", BiasFreeCNN),
        ("mse", "freeze_stats", partial(SmallCNNEncoder, embed_dim=EMB)),
    ],
)
def test_stacked_trials_equal_sequential_lightning_training(loss, mode, encoder, how):
    x, xv, y, n_out, weight = _problem(loss)
    configs = [
        StackedConfig(11, 16, 0.0, 1e-2, 1e-3, 0.0, 0.0),
        StackedConfig(12, 16, 0.0, 3e-3, 3e-3, 1e-2, 1e-2),
        StackedConfig(13, 16, 0.0, 1e-3, 1e-5, 1e-4, 1e-4),
    ]
    nets = [_net(n_out, c.seed, encoder) for c in configs]
    pre = SmallCNNEncoder(embed_dim=EMB).preprocess
    data = StackedData(pre(x), y, pre(xv), loss, torch.tensor(weight) if weight else None)
    reports: dict[int, list[float]] = {}
    outcomes = train_stacked(
        [copy.deepcopy(n) for n in nets],
        configs,
        data,
        EPOCHS,
        lambda i, out: float(out.mean()),
        lambda i, epoch, best: reports.setdefault(i, []).append(best) is None and False,
        freeze_stats=mode == "freeze_stats",
        **how,
    )
    for i, config in enumerate(configs):
        ref, history = _reference(nets[i], config, mode, x, xv, y, loss, weight)
        got = outcomes[i]
        assert got.state == ref.state == "complete" and got.best_epoch == ref.best_epoch
        assert reports[i] == pytest.approx(np.maximum.accumulate(history).tolist(), rel=1e-4, abs=1e-5)
        for key, value in ref.weights.items():
            if key.startswith(("encoder.", "head.")):
                torch.testing.assert_close(got.weights[key].to(value.dtype), value, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("how", MODES)
def test_dropout_and_pruning_stay_with_their_trial(how):
    data, n_out = _mse_data()
    configs = [
        StackedConfig(1, 16, 0.3, 1e-2, 1e-3, 0.0, 0.0),
        StackedConfig(2, 16, 0.0, 1e-2, 1e-3, 0.0, 0.0),
        StackedConfig(3, 16, 0.3, 1e-3, 1e-4, 0.0, 0.0),
    ]
    nets = [_net(n_out, c.seed) for c in configs]
    seen: list[tuple[int, int]] = []

    def on_epoch(i, epoch, best):
        seen.append((i, epoch))
        return i == 1 and epoch == 1

    together = train_stacked(
        [copy.deepcopy(n) for n in nets], configs, data, EPOCHS, lambda i, o: float(o.mean()), on_epoch, **how
    )
    assert [o.state for o in together] == ["complete", "pruned", "complete"] and together[1].epochs_run == 2
    assert (1, 2) not in seen and (0, 2) in seen
    for i in (0, 2):  # a trial with dropout, trained in a stack = trained alone (its own masks and batches)
        (alone,) = train_stacked(
            [copy.deepcopy(nets[i])], configs[i : i + 1], data, EPOCHS, lambda j, o: float(o.mean()), **how
        )
        assert alone.value == pytest.approx(together[i].value, rel=1e-5)
        for key, value in alone.weights.items():
            torch.testing.assert_close(together[i].weights[key], value, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("how", MODES)
def test_a_trial_that_turns_non_finite_completes_with_its_best_earlier_epoch(how):
    data, n_out = _mse_data()
    configs = [
        StackedConfig(1, 16, 0.0, 1e-2, 1e-3, 0.0, 0.0),
        StackedConfig(2, 16, 0.0, 1e-2, 1e-3, 0.0, 0.0),
    ]
    scores = iter([1.0, 2.0, 5.0, math.nan, 4.0])  # epoch 1: trials 0, 1; epoch 2: 0, 1; epoch 3: 0

    def score(i, out):
        return next(scores)

    reports: dict[int, list[float]] = {}
    good, broken = train_stacked(
        [_net(n_out, 1), _net(n_out, 2)],
        configs,
        data,
        EPOCHS,
        score,
        lambda i, e, b: reports.setdefault(i, []).append(b) is None and False,
        **how,
    )
    assert good.state == "complete"
    # trial 1 scored 2.0 at epoch 1, then went non-finite: it completes with epoch 1 (published behaviour)
    assert broken.state == "complete" and broken.best_epoch == 1 and broken.value == 2.0
    assert reports[1] == [2.0, 2.0, 2.0] and broken.weights is not None
    huge = StackedConfig(2, 16, 0.0, 1e30, 1e30, 0.0, 0.0)  # non-finite from the first epoch on
    (never,) = train_stacked([_net(n_out, 2)], [huge], data, EPOCHS, lambda i, o: float(o.mean()), **how)
    assert never.state == "failed" and "non-finite" in never.failure


@pytest.mark.parametrize("how", MODES)
def test_mixed_batchnorm_modes_share_a_stack(how):
    data, n_out = _mse_data()
    configs = [
        StackedConfig(1, 16, 0.0, 1e-2, 1e-3, 1e-4, 1e-4),
        StackedConfig(2, 16, 0.0, 1e-2, 1e-3, 0.0, 0.0),
    ]
    nets = [_net(n_out, c.seed) for c in configs]
    together = train_stacked(
        [copy.deepcopy(n) for n in nets],
        configs,
        data,
        2,
        lambda i, o: float(o.mean()),
        freeze_stats=[False, True],
        **how,
    )
    for i, frozen in enumerate((False, True)):
        (alone,) = train_stacked(
            [copy.deepcopy(nets[i])],
            configs[i : i + 1],
            data,
            2,
            lambda j, o: float(o.mean()),
            freeze_stats=frozen,
            **how,
        )
        assert set(alone.weights) == set(together[i].weights)
        for key, value in alone.weights.items():
            torch.testing.assert_close(together[i].weights[key], value, atol=1e-5, rtol=1e-4)
    stats = "encoder.features.1.running_mean"
    assert torch.equal(
        together[1].weights[stats], nets[1].state_dict()[stats]
    )  # frozen: statistics never move
    assert not torch.equal(together[0].weights[stats], nets[0].state_dict()[stats])


def test_interleaved_stack_mixes_batch_sizes_and_each_trial_equals_its_run_alone():
    data, n_out = _mse_data()
    configs = [
        StackedConfig(1, 8, 0.3, 1e-2, 1e-3, 0.0, 0.0),
        StackedConfig(2, 16, 0.0, 1e-2, 1e-3, 1e-4, 1e-4),
        StackedConfig(3, 48, 0.3, 3e-3, 1e-3, 0.0, 0.0),
    ]
    nets = [_net(n_out, c.seed) for c in configs]
    with pytest.raises(ValueError, match="one batch size"):
        train_stacked([copy.deepcopy(n) for n in nets], configs, data, 1, mode="vmap")
    scores = lambda i, o: float(o.mean())  # noqa: E731
    together = train_stacked([copy.deepcopy(n) for n in nets], configs, data, EPOCHS, scores,
                             freeze_stats=[False, True, False], mode="interleaved", workers=2)
    for i, frozen in enumerate((False, True, False)):
        (alone,) = train_stacked([copy.deepcopy(nets[i])], configs[i : i + 1], data, EPOCHS, scores,
                                 freeze_stats=frozen, mode="vmap")
        assert together[i].best_epoch == alone.best_epoch
        assert together[i].value == pytest.approx(alone.value, rel=1e-5, abs=1e-6)
        for key, value in alone.weights.items():
            torch.testing.assert_close(together[i].weights[key], value, atol=1e-5, rtol=1e-4)


def test_interleaved_workers_leave_torch_threads_as_they_were():
    data, n_out = _mse_data()
    configs = [StackedConfig(s, 16, 0.0, 1e-2, 1e-3, 0.0, 0.0) for s in (1, 2)]
    before = torch.get_num_threads()
    train_stacked([_net(n_out, 1), _net(n_out, 2)], configs, data, 1, mode="interleaved", workers=2)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="stack mode"):
        train_stacked([_net(n_out, 1)], configs[:1], data, 1, mode="grouped")


def test_an_encoder_with_dropout_is_never_interleaved():
    """Threads would draw its masks from the global generator in timing order: ``auto`` takes vmap and an
    explicit ``interleaved`` is refused; an encoder without dropout is interleaved on the CPU."""
    from torch import nn

    from ppgbench_pl.hpo.stacked import random_modules, resolve_stack_mode

    cpu = torch.device("cpu")
    plain = nn.Sequential(nn.Conv1d(1, 4, 3), nn.BatchNorm1d(4), nn.ReLU())
    dropping = nn.Sequential(nn.Conv1d(1, 4, 3), nn.Dropout(0.5), nn.Dropout(0.0))
    attending = nn.Sequential(nn.MultiheadAttention(8, 2, dropout=0.1))
    assert random_modules(plain) == [] and random_modules(dropping) == ["1"] and random_modules(attending) == ["0"]
    assert resolve_stack_mode("auto", cpu, plain) == "interleaved"
    assert resolve_stack_mode("auto", cpu, dropping) == "vmap"
    assert resolve_stack_mode("auto", cpu, attending) == "vmap"
    assert resolve_stack_mode("vmap", cpu, dropping) == "vmap"
    with pytest.raises(ValueError, match=r"interleaved would draw the encoder's dropout masks \(1\)"):
        resolve_stack_mode("interleaved", cpu, dropping)
