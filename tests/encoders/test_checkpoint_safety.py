"""Hostile checkpoints: no encoder ever runs code from a checkpoint file (issue 12 item 1).

Each encoder reads weights through ``encoders/checkpoint.py``. A ``torch.save`` file or a plain pickle
whose payload calls ``os.system`` / ``builtins.exec`` / ``subprocess.Popen`` must be refused with one line
naming the file and the global, and the payload's marker file must never appear.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import pickle
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ppgbench_pl.encoders import ENCODERS, FOUNDATION_MODELS, PPGEncoder
from ppgbench_pl.encoders import checkpoint as ckpt
from ppgbench_pl.encoders.checkpoint import read_checkpoint_file
from ppgbench_pl.encoders.custom import CustomEncoder
from ppgbench_pl.errors import CheckpointError
from tests.encoders.test_custom import TinyConvNet
from tests.encoders.test_registry import build_encoder


class Payload:
    """Pickles as a call of ``func(*args)``: what a tampered checkpoint carries."""

    def __init__(self, func: Callable[..., Any], *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, ...]:
        return self.func, self.args


def payloads(marker: Path) -> dict[str, tuple[str, Payload]]:
    """Three ways to create ``marker``; each value is (global the file names, payload)."""
    return {
        "os.system": (f"{os.system.__module__}.system", Payload(os.system, f"touch {marker}")),
        "exec": ("builtins.exec", Payload(exec, f"open({str(marker)!r}, 'w').close()")),
        "subprocess": ("subprocess.Popen", Payload(subprocess.Popen, ["touch", str(marker)])),
    }


def write_hostile(path: Path, fmt: str, payload: Payload, state: dict[str, Any]) -> None:
    """A checkpoint in the authors' shape with the payload tucked in next to the weights."""
    content = {"net": state, "model": state, "state_dict": state, "epoch": 1, "x": payload}
    if fmt == "torch":
        torch.save(content, path)
    elif fmt == "legacy":
        torch.save(content, path, _use_new_zipfile_serialization=False)
    else:
        with path.open("wb") as handle:
            pickle.dump(content, handle)


ENCODER_NAMES = [*FOUNDATION_MODELS, "small_cnn", "custom"]


@functools.cache
def encoder(name: str) -> PPGEncoder:
    """One instance per encoder and session, shared with test_registry (the transformers are slow)."""
    if name == "custom":
        return CustomEncoder(TinyConvNet(), sampling_rate=32.0, pooling="mean", random_init=True)
    return build_encoder(name)


@pytest.mark.parametrize("fmt", ["torch", "pickle"])
@pytest.mark.parametrize("how", ["os.system", "exec", "subprocess"])
@pytest.mark.parametrize("name", ENCODER_NAMES)
def test_hostile_checkpoint_is_refused_and_never_runs(name: str, how: str, fmt: str, tmp_path: Path) -> None:
    marker = tmp_path / "PAYLOAD_RAN"
    offender, payload = payloads(marker)[how]
    path = tmp_path / ("evil.pt" if fmt == "torch" else "evil.pkl")
    write_hostile(path, fmt, payload, {"w": torch.zeros(2)})
    with pytest.raises(CheckpointError) as info:
        encoder(name).load_pretrained(path)
    expected = f"{path}: refused to load: it references {offender}, which a checkpoint never needs"
    assert str(info.value) == expected
    assert not marker.exists()


@pytest.mark.parametrize("fmt", ["torch", "legacy", "pickle"])
def test_refused_even_when_the_static_scan_misses_it(fmt: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The unpickler itself is restricted too: the scan only makes the message precise."""
    marker = tmp_path / "PAYLOAD_RAN"
    offender, payload = payloads(marker)["os.system"]
    path = tmp_path / "evil.bin"
    write_hostile(path, fmt, payload, {"w": torch.zeros(2)})
    monkeypatch.setattr(ckpt, "_scan", lambda *_: iter(()))
    with pytest.raises(CheckpointError, match=rf"refused to load: it references {offender}\b"):
        read_checkpoint_file(path)
    assert not marker.exists()


def test_hostile_file_via_the_constructor_is_one_line(tmp_path: Path) -> None:
    """The path a config takes (``checkpoint:`` in init_args)."""
    marker = tmp_path / "PAYLOAD_RAN"
    path = tmp_path / "checkpoint_best.pkl"
    write_hostile(path, "torch", payloads(marker)["exec"][1], {"w": torch.zeros(2)})
    with pytest.raises(CheckpointError) as info:
        ENCODERS["pulseppg"](checkpoint=str(path), base_filters=8, n_block=2)  # type: ignore[call-arg]
    assert "\n" not in str(info.value) and "builtins.exec" in str(info.value)
    assert not marker.exists()


# -- what the authors' files hold still loads ---------------------------------------------------------
def training_state() -> dict[str, Any]:
    """Weights plus what the authors' training checkpoints carry: optimizer, NumPy loss, argparse args."""
    weights = collections.OrderedDict(w=torch.randn(3), b=torch.arange(2))
    param = torch.nn.Parameter(torch.randn(2))
    optimizer = torch.optim.Adam([param])
    param.grad = torch.ones(2)
    optimizer.step()
    return {"net": weights, "optimizer": optimizer.state_dict(), "test_loss": np.float64(0.25), "epoch": 3,
            "args": argparse.Namespace(lr=1e-4, window_size=(1, 120), output_dir="", resume=None),
            "scores": np.arange(3.0), "flags": {True, False}}


@pytest.mark.parametrize("fmt", ["torch", "legacy", "pickle"])
def test_authors_training_state_loads(fmt: str, tmp_path: Path) -> None:
    state = training_state()
    path = tmp_path / "ckpt.bin"
    if fmt == "pickle":
        with path.open("wb") as handle:
            pickle.dump(state, handle)
    else:
        torch.save(state, path, _use_new_zipfile_serialization=fmt == "torch")
    loaded = read_checkpoint_file(path)
    assert torch.equal(loaded["net"]["w"], state["net"]["w"]) and loaded["epoch"] == 3
    assert loaded["test_loss"] == np.float64(0.25) and loaded["args"].window_size == (1, 120)
    assert np.array_equal(loaded["scores"], state["scores"])
    assert loaded["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_not_a_checkpoint_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "junk.pt"
    path.write_bytes(b"definitely not a pickle")
    with pytest.raises(CheckpointError) as info:
        read_checkpoint_file(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_pickle_of_tensors_parameters_and_arrays_loads(protocol: int, tmp_path: Path) -> None:
    """A plain pickle is rebuilt by our public-API rebuilders: views, parameters, dtypes, protocol-5 arrays."""
    base = torch.arange(6.0).view(2, 3)
    state = {"view": base[:, 1], "param": torch.nn.Parameter(torch.ones(2)), "frozen": torch.nn.Parameter(
        torch.zeros(1), requires_grad=False), "dtype": torch.float16, "device": torch.device("cpu"),
        "size": torch.Size([2, 3]), "ints": torch.arange(3, dtype=torch.int64), "array": np.eye(2),
        "scalar": np.int32(7), "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3))}
    path = tmp_path / "plain.pkl"
    path.write_bytes(pickle.dumps(state, protocol=protocol))
    loaded = read_checkpoint_file(path)
    assert torch.equal(loaded["view"], base[:, 1]) and loaded["view"].stride() == (3,)
    assert isinstance(loaded["param"], torch.nn.Parameter) and loaded["param"].requires_grad
    assert not loaded["frozen"].requires_grad and loaded["ints"].dtype == torch.int64
    assert (loaded["dtype"], loaded["device"], loaded["size"]) == (torch.float16, torch.device("cpu"),
                                                                  torch.Size([2, 3]))
    assert np.array_equal(loaded["array"], np.eye(2)) and loaded["scalar"] == np.int32(7)
    assert np.array_equal(loaded["fortran"], state["fortran"])


@pytest.mark.parametrize("fmt", ["torch", "legacy", "pickle"])
def test_numpy_objects_outside_the_allow_list_are_refused(fmt: str, tmp_path: Path) -> None:
    """An array subclass (here a masked array) is refused in one line, in every format."""
    path = tmp_path / "arrays.bin"
    content = {"w": torch.zeros(2), "m": np.ma.masked_array([1.0, 2.0])}
    if fmt == "pickle":
        path.write_bytes(pickle.dumps(content))
    else:
        torch.save(content, path, _use_new_zipfile_serialization=fmt == "torch")
    with pytest.raises(CheckpointError, match=r"refused to load: it references numpy\.ma\.") as info:
        read_checkpoint_file(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
