"""CustomEncoder: a user's module runs every path (YAML fit, checkpoint, preprocess, frozen, finetune)."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from torch import Tensor, nn

from ppgbench_pl.cli import main
from ppgbench_pl.encoders.custom import CustomEncoder
from ppgbench_pl.encoders.custom_settings import resolve_callable
from ppgbench_pl.errors import CheckpointError, ConfigError
from ppgbench_pl.tasks.encoder_task import EncoderTask

FS = 32.0
PREPROCESS_CALLS: list[tuple[tuple[int, ...], float]] = []


class TinyConvNet(nn.Module):
    """Two conv layers returning a feature map ``[B, width, T']`` (so the wrapper must pool)."""

    def __init__(self, width: int = 6) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, 4, 5, stride=2, padding=2)
        self.bn = nn.BatchNorm1d(4)
        self.conv2 = nn.Conv1d(4, width, 3, stride=2, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(torch.relu(self.bn(self.conv1(x))))


class FlatTupleNet(nn.Module):
    """Takes ``[B, T]`` and returns ``(embedding, aux)`` like PaPaGei-style models."""

    def __init__(self, length: int = 320, dim: int = 5) -> None:
        super().__init__()
        self.fc = nn.Linear(length, dim)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        assert x.ndim == 2
        return self.fc(x), x.mean(-1)


def double_first_half(x: Tensor, fs: float) -> Tensor:
    """Test preprocessing: records its calls, keeps the first half of the window and doubles it."""
    PREPROCESS_CALLS.append((tuple(x.shape), fs))
    return 2 * x[:, : x.shape[1] // 2]


def not_a_tensor(x: Tensor, fs: float) -> str:
    return "nope"


def _windows(batch: int = 2, seconds: float = 10.0) -> Tensor:
    return torch.randn(batch, int(seconds * FS)) * 3 + 10


# -- unit behaviour -----------------------------------------------------------------------------
def test_embed_dim_inferred_and_pooling() -> None:
    enc = CustomEncoder(TinyConvNet(width=7), sampling_rate=FS, weights_in_module=True, name="tiny",
                        pooling="mean")
    assert enc.embed_dim == 7 and enc.name == "tiny" and enc.sampling_rate == FS and enc.trainable
    assert type(enc).name == "custom"  # per instance, the class attribute (the catalog name) is untouched
    x = _windows()
    mean_out = enc.eval()(x)
    assert mean_out.shape == (2, 7)
    enc.pooling = "max"
    max_out = enc(x)
    assert max_out.shape == (2, 7) and not torch.allclose(mean_out, max_out)


def test_inference_keeps_batchnorm_and_rng_state() -> None:
    net = TinyConvNet()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    torch.manual_seed(3)
    CustomEncoder(net, sampling_rate=FS, weights_in_module=True, pooling="mean")
    after_rng = torch.rand(1)
    torch.manual_seed(3)
    assert torch.equal(after_rng, torch.rand(1))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items()) and net.training


def test_feature_map_without_pooling_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True)
    assert str(info.value) == (
        "tiny_conv_net: the module's output does not fit the settings: given [2, 1, 320] (input_shape: BCT) "
        "expected embeddings [B, D] for a batch of 2, the module returned [2, 6, 80]; with pooling: mean "
        "it gives [B, 6] embeddings, so set pooling: mean")


def test_bt_input_and_tuple_output() -> None:
    enc = CustomEncoder(FlatTupleNet(length=320), sampling_rate=FS, weights_in_module=True, input_shape="BT",
                        normalize="window_zscore")
    x = _windows()
    assert enc.preprocess(x).shape == (2, 320)
    torch.testing.assert_close(enc.preprocess(x).mean(-1), torch.zeros(2), atol=1e-4, rtol=0)
    assert enc(x).shape == (2, 5) and enc.embed_dim == 5


def test_declared_embed_dim_is_checked_at_build() -> None:
    with pytest.raises(ConfigError, match=r"^tiny_conv_net: embed_dim is 9 but the module gives 6-d embeddings; "
                                          r"set embed_dim: 6 or drop it"):
        CustomEncoder(TinyConvNet(width=6), sampling_rate=FS, weights_in_module=True, embed_dim=9,
                      pooling="mean")
    enc = CustomEncoder(TinyConvNet(width=6), sampling_rate=FS, weights_in_module=True, embed_dim=6,
                        pooling="mean")
    enc.embed_dim = 9  # type: ignore[misc]  # a forward still checks it
    with pytest.raises(ValueError, match="6-d embeddings, but embed_dim is 9"):
        enc(_windows())


def test_preprocess_callable_both_spellings() -> None:
    assert resolve_callable("tests.encoders.test_custom:double_first_half") is double_first_half
    assert resolve_callable("tests.encoders.test_custom.double_first_half") is double_first_half
    enc = CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean",
                        preprocess="tests.encoders.test_custom.double_first_half")
    PREPROCESS_CALLS.clear()
    x = _windows()
    torch.testing.assert_close(enc.preprocess(x), 2 * x[:, None, :160])
    assert PREPROCESS_CALLS == [((2, 320), FS)]


@pytest.mark.parametrize("path, match", [
    ("tests.encoders.nowhere:f", "cannot import"),
    ("tests.encoders.test_custom:missing_fn", "has no attribute"),
    ("tests.encoders.test_custom:FS", "not callable"),
    ("justaname", "expected"),
])
def test_bad_preprocess_paths(path: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean",
                      preprocess=path)


def test_preprocess_must_return_a_tensor() -> None:
    with pytest.raises(ConfigError, match="preprocessing a dummy .* returned str"):
        CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean",
                      preprocess="tests.encoders.test_custom:not_a_tensor")


@pytest.mark.parametrize("kwargs, match", [
    ({"input_shape": "TBC"}, "input_shape"), ({"normalize": "minmax"}, "normalize"),
    ({"pooling": "cls"}, "pooling"), ({"sampling_rate": 0.0}, "sampling_rate"), ({"name": ""}, "name"),
    ({"embed_dim": 0}, "embed_dim"), ({"min_samples": 0}, "min_samples"),
])
def test_invalid_settings(kwargs: dict[str, Any], match: str) -> None:
    settings: dict[str, Any] = {"sampling_rate": FS, "pooling": "mean", "weights_in_module": True, **kwargs}
    with pytest.raises(ConfigError, match=match):
        CustomEncoder(TinyConvNet(), **settings)


def test_short_window_refused() -> None:
    enc = CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean",
                        min_samples=64)
    with pytest.raises(ValueError, match="at least 64 samples"):
        enc(torch.randn(2, 63))


# -- checkpoints --------------------------------------------------------------------------------
def test_checkpoint_bare_and_nested_with_prefix(tmp_path: Path) -> None:
    source = TinyConvNet()
    with torch.no_grad():
        source.conv1.weight.add_(1.0)
        source.bn.running_mean.fill_(0.5)
    bare, nested = tmp_path / "bare.pt", tmp_path / "lightning.ckpt"
    torch.save(source.state_dict(), bare)
    lightning_state = {f"model.{k}": v for k, v in source.state_dict().items()}
    lightning_state["head.weight"] = torch.zeros(3)  # other parts of a training checkpoint are ignored
    torch.save({"state_dict": lightning_state, "epoch": 3}, nested)
    x = _windows()
    want = CustomEncoder(source, sampling_rate=FS, weights_in_module=True, pooling="mean").eval()(x)
    for path, extra in ((bare, {}), (nested, {"state_dict_key": "state_dict", "key_prefix": "model."})):
        enc = CustomEncoder(TinyConvNet(), sampling_rate=FS, pooling="mean", checkpoint=str(path), **extra)
        torch.testing.assert_close(enc.eval()(x), want)
        assert enc.checkpoint_digest() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_checkpoint_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "w.pt"
    torch.save({"net": TinyConvNet(width=3).state_dict()}, path)
    with pytest.raises(CheckpointError, match=r"w\.pt.*no 'model' entry"):
        CustomEncoder(TinyConvNet(), sampling_rate=FS, pooling="mean", checkpoint=str(path),
                      state_dict_key="model")
    with pytest.raises(CheckpointError, match=r"w\.pt.*not a state dict.*state_dict_key.*\[.net.\]"):
        CustomEncoder(TinyConvNet(), sampling_rate=FS, pooling="mean", checkpoint=str(path))
    with pytest.raises(CheckpointError, match=r"w\.pt.*wrong shapes \[conv2"):
        CustomEncoder(TinyConvNet(), sampling_rate=FS, pooling="mean", checkpoint=str(path),
                      state_dict_key="net")
    with pytest.raises(CheckpointError, match="no checkpoint key starts with 'encoder.'"):
        CustomEncoder(TinyConvNet(), sampling_rate=FS, pooling="mean", checkpoint=str(path),
                      state_dict_key="net", key_prefix="encoder.")


def test_unsafe_pickle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "obj.pt"
    torch.save({"model": TinyConvNet()}, path)  # a whole pickled module, not a state dict
    with pytest.raises(CheckpointError) as info:
        CustomEncoder(TinyConvNet(), sampling_rate=FS, pooling="mean", checkpoint=str(path))
    assert str(info.value) == (f"{path}: refused to load: it references "
                               "tests.encoders.test_custom.TinyConvNet, which a checkpoint never needs")


def test_identity_tracks_module_code_and_preprocess() -> None:
    plain = CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean")
    prep = CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean",
                         preprocess="tests.encoders.test_custom:double_first_half")
    other = CustomEncoder(FlatTupleNet(), sampling_rate=FS, weights_in_module=True, input_shape="BT")
    assert len({plain.code_sha256, prep.code_sha256, other.code_sha256}) == 3
    assert plain.module_class == "tests.encoders.test_custom.TinyConvNet"


# -- EncoderTask modes --------------------------------------------------------------------------
def _step(task: EncoderTask, batch: dict[str, Tensor]) -> None:
    optimizer = task.configure_optimizers()
    task.train()
    loss = task.compute_loss(task(batch), batch["y"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _snapshot(module: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("mode", ["frozen", "finetune"])
def test_encoder_task_modes(mode: str) -> None:
    enc = CustomEncoder(TinyConvNet(), sampling_rate=FS, weights_in_module=True, pooling="mean",
                        normalize="window_zscore")
    task = EncoderTask(enc, mode=mode, head=nn.Linear(enc.embed_dim, 1), head_lr=0.1)
    before = _snapshot(enc)
    _step(task, {"x": _windows(4), "y": torch.randn(4)})
    after = _snapshot(enc)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    if mode == "frozen":
        assert not changed and not enc.training
    else:
        assert {"module.conv1.weight", "module.bn.running_mean", "module.bn.num_batches_tracked"} <= changed
        assert enc.training


def test_parameter_free_module_is_not_trainable() -> None:
    enc = CustomEncoder(nn.Flatten(), sampling_rate=FS, weights_in_module=True, input_shape="BT",
                        embed_dim=320)
    assert not enc.trainable and enc(_windows()).shape == (2, 320)
    with pytest.raises(ValueError, match="no trainable parameters"):
        EncoderTask(enc, mode="finetune")


# -- end to end through the CLI -----------------------------------------------------------------
TINY_DATA = ["--data.init_args.synthetic_subjects", "10", "--data.init_args.synthetic_windows", "4",
             "--data.init_args.seeds", "[42]", "--data.init_args.folds", "[0]"]


def fit_config(encoder_args: dict[str, Any], output_dir: Path, data_root: Path) -> dict[str, Any]:
    """A complete run config: the custom encoder under the linear regime on two synthetic tasks."""
    return {
        "seed_everything": 42,
        "output_dir": str(output_dir),
        "progress": False,
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"mode": "frozen", "encoder": {
            "class_path": "ppgbench_pl.encoders.custom.CustomEncoder", "init_args": encoder_args}}},
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule", "init_args": {
            "dataset": "synthetic", "root": str(data_root), "tasks": ["synthetic-hr", "synthetic-activity"]}},
        "trainer": {"accelerator": "cpu", "devices": 1, "logger": False,
                    "callbacks": [{"class_path": "ppgbench_pl.regimes.LinearRegime"}]},
    }


def run_fit(config: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Write the config, run ``ppgbench fit`` in-process; return the model's summary rows and run.json."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        main(["fit", "--config", str(path), *TINY_DATA])
    except SystemExit as exc:  # the CLI may end with an explicit exit status
        assert exc.code in (0, None), f"fit exited with {exc.code}"
    out = Path(config["output_dir"])
    with (out / "summary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    name = CustomEncoder.config_name(config["model"]["init_args"]["encoder"]["init_args"])
    return {"rows": [r for r in rows if r["model"] == name], "models": {r["model"] for r in rows},
            "run": json.loads((out / "run.json").read_text())}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("synthetic_data")


TINY_MODULE = {"class_path": "tests.encoders.test_custom.TinyConvNet", "init_args": {"width": 5}}


def _assert_scored(result: dict[str, Any]) -> None:
    assert {r["task"] for r in result["rows"]} == {"synthetic-hr", "synthetic-activity"}
    assert all(r["regime"] == "linear" and float(r["mean"]) == float(r["mean"]) for r in result["rows"])


def test_fit_from_yaml(tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a checkpoint and with random_init: true, every table carries '(random init)'."""
    args = {"module": TINY_MODULE, "name": "tiny", "sampling_rate": FS, "pooling": "mean",
            "normalize": "window_zscore", "random_init": True}
    result = run_fit(fit_config(args, tmp_path / "out", data_root), tmp_path, monkeypatch)
    _assert_scored(result)
    assert "tiny (random init)" in result["models"] and "tiny" not in result["models"]
    identity = result["run"]["identity"]["encoders"]["tiny (random init)"]
    assert identity["class"] == "ppgbench_pl.encoders.custom.CustomEncoder"


def test_fit_with_saved_checkpoint(tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = tmp_path / "tiny.pt"
    torch.manual_seed(0)
    torch.save({"model": {f"net.{k}": v for k, v in TinyConvNet(width=5).state_dict().items()}}, ckpt)
    args = {"module": TINY_MODULE, "name": "tiny_ckpt", "sampling_rate": FS, "pooling": "max",
            "checkpoint": str(ckpt), "state_dict_key": "model", "key_prefix": "net."}
    result = run_fit(fit_config(args, tmp_path / "out", data_root), tmp_path, monkeypatch)
    _assert_scored(result)
    weights = result["run"]["identity"]["encoders"]["tiny_ckpt"]["weights"]
    assert weights == hashlib.sha256(ckpt.read_bytes()).hexdigest()


def test_fit_with_preprocess_callable(tmp_path: Path, data_root: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    PREPROCESS_CALLS.clear()
    args = {"module": TINY_MODULE, "name": "tiny_prep", "sampling_rate": FS, "pooling": "mean",
            "preprocess": "tests.encoders.test_custom:double_first_half", "input_shape": "BCT",
            "weights_in_module": True}
    result = run_fit(fit_config(args, tmp_path / "out", data_root), tmp_path, monkeypatch)
    _assert_scored(result)
    assert PREPROCESS_CALLS and all(fs == FS for _, fs in PREPROCESS_CALLS)
    assert sum(shape[0] for shape, _ in PREPROCESS_CALLS) >= 40 + 2  # every window, plus the dim probe


@pytest.mark.slow
def test_fit_neural_regimes(tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MLP and finetune regimes (Optuna searches, tiny budgets) need no adapter class either."""
    args = {"module": TINY_MODULE, "name": "tiny_neural", "sampling_rate": FS, "pooling": "mean",
            "random_init": True}
    config = fit_config(args, tmp_path / "out", data_root)
    budget = {"n_trials": 2, "n_startup_trials": 1, "max_epochs": 1, "parallel_trials": 1, "subject_repeats": 1}
    config["trainer"]["callbacks"] = [
        {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime", "init_args": budget},
        {"class_path": "ppgbench_pl.regimes.finetune.FinetuneRegime", "init_args": budget},
    ]
    result = run_fit(config, tmp_path, monkeypatch)
    assert {(r["task"], r["regime"]) for r in result["rows"]} == {
        (t, g) for t in ("synthetic-hr", "synthetic-activity") for g in ("mlp", "finetune")}
