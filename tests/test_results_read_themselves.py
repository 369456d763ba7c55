"""Issue 20 point 7: a model built from a class gets the snake case of its class name; README's API is the API."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from torch import Tensor, nn

import ppgbench_pl as pb
from ppgbench_pl.naming import snake_case

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("class_name", "name"), [
    ("TinyPPGCNN", "tiny_ppg_cnn"), ("MyNet", "my_net"), ("PPGNet", "ppg_net"), ("MyCNNEncoder", "my_cnn_encoder"),
    ("ResNet1D", "res_net1d"), ("Conv1DNet", "conv1d_net"), ("SimpleMLP2", "simple_mlp2"), ("MLP", "mlp"),
    ("HTTPServer", "http_server"), ("ABCDef", "abc_def"), ("lower", "lower"), ("", "model"),
])
def test_snake_case_of_class_names(class_name, name):
    assert snake_case(class_name) == name


class TinyPPGCNN(nn.Module):
    """A user's network: [B, 1, T] -> [B, 4]."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 5)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x).mean(dim=-1)


def test_the_api_names_a_module_after_its_class_and_keeps_a_given_name():
    from ppgbench_pl.api import encoder_entry

    assert encoder_entry(TinyPPGCNN(), sampling_rate=64).name == "tiny_ppg_cnn"
    assert encoder_entry(TinyPPGCNN(), sampling_rate=64, name="mine").name == "mine"


def test_an_encoder_class_without_a_name_is_named_after_it_and_published_names_stay():
    from ppgbench_pl.encoders import ENCODERS, PPGEncoder
    from ppgbench_pl.encoders.catalog import CATALOG
    from ppgbench_pl.encoders.papagei import PaPaGeiSEncoder

    class MyPPGEncoder(PPGEncoder):
        sampling_rate = 64.0

    class TunedPaPaGei(PaPaGeiSEncoder):  # a published model's subclass keeps its name
        pass

    assert MyPPGEncoder.name == "my_ppg_encoder" == MyPPGEncoder.config_name({})
    assert TunedPaPaGei.name == "papagei_s"
    assert {name: cls.name for name, cls in ENCODERS.items()} == {name: name for name in ENCODERS}
    assert set(ENCODERS) | {"custom"} == set(CATALOG)


def _readme_results_row() -> list[str]:
    text = (ROOT / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `Results` |"))
    return re.findall(r"`\.(\w+(?:\([^`]*\))?)`", row)


def test_the_readme_shows_each_results_member_as_it_is_used():
    """``.records()`` is a method and ``.summary`` a property: the README writes each the way it is called."""
    shown = _readme_results_row()
    assert {"summary", "jobs", "records()", "failed"} <= {s.split("(")[0] + ("()" if "(" in s else "") for s in shown}
    folder = pb.Results("nowhere")
    for item in shown:
        name = item.split("(")[0]
        static = inspect.getattr_static(pb.Results, name, None)
        if "(" in item:
            assert inspect.isfunction(static), f"README shows .{item} but Results.{name} is not a method"
        else:
            assert isinstance(static, property) or name in vars(folder), \
                f"README shows .{name} as an attribute but Results.{name} is a method (write .{name}())"
