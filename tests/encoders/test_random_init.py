"""No random weights under a published name (issue 11 item 1), and CustomEncoder build checks (item 9).

A published encoder without its authors' checkpoint refuses to build in one line saying where the
weights are published, unless ``random_init: true``; then its name carries `` (random init)`` everywhere a
name goes (records, summary.csv, W&B, report). ``config_name`` gives that name without building.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from ppgbench_pl.cli import main
from ppgbench_pl.encoders import ENCODERS, FOUNDATION_MODELS
from ppgbench_pl.encoders.base import RANDOM_INIT_SUFFIX
from ppgbench_pl.encoders.custom import CustomEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.results.records import job_id
from tests.encoders.test_custom import FlatTupleNet, TinyConvNet

ROOT = Path(__file__).resolve().parents[2]
EXEMPT = ("prv_neurokit2", "prv_published", "small_cnn")  # controls and the test CNN: not published models
#: Where each published model's weights are, as the refusal must say.
PUBLISHED_AT = {
    "papagei_p": "https://zenodo.org/records/13983110",
    "papagei_s": "https://zenodo.org/records/13983110",
    "pulseppg": "https://doi.org/10.5281/zenodo.17270930",
    "anyppg": "https://github.com/PKUDigitalHealth/AnyPPG",
    "sigmappg": "https://huggingface.co/zonhengu/sigmappg",
    "moment_small": "https://huggingface.co/AutonLab/MOMENT-1-small",
}


def test_every_published_model_has_a_source() -> None:
    assert set(PUBLISHED_AT) == set(FOUNDATION_MODELS)
    assert set(ENCODERS) == set(FOUNDATION_MODELS) | set(EXEMPT)


@pytest.mark.parametrize("name", FOUNDATION_MODELS)
def test_published_model_without_checkpoint_refuses_in_one_line(name: str) -> None:
    cls = ENCODERS[name]
    with pytest.raises(ConfigError) as info:
        cls()
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{name}: no checkpoint given")
    assert PUBLISHED_AT[name] in message and "checkpoint: <path>" in message
    assert "random_init: true" in message
    assert f"'{name} (random init)'" in message
    with pytest.raises(ConfigError) as planned:  # the dry-run plan refuses the same entry
        cls.config_name({})
    assert str(planned.value) == message


@pytest.mark.parametrize("name", FOUNDATION_MODELS)
def test_config_name(name: str) -> None:
    cls = ENCODERS[name]
    assert cls.config_name({"random_init": True}) == f"{name}{RANDOM_INIT_SUFFIX}"
    assert cls.config_name({"checkpoint": "w.pt"}) == name
    assert cls.config_name({"checkpoint": "w.pt", "random_init": False}) == name
    with pytest.raises(ConfigError, match="contradict"):
        cls.config_name({"checkpoint": "w.pt", "random_init": True})


@pytest.mark.parametrize("name", EXEMPT)
def test_exempt_encoders_build_without_weights(name: str) -> None:
    cls = ENCODERS[name]
    assert cls().name == cls.config_name({}) == cls.config_name(None) == name


def test_random_init_name_and_seeded_weights() -> None:
    cls = ENCODERS["papagei_p"]
    a, b = cls(random_init=True), cls(random_init=True)
    assert a.name == "papagei_p (random init)" and type(a).name == "papagei_p"
    assert a.checkpoint_digest() == b.checkpoint_digest()  # same "random" weights in every run
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    cls(random_init=True)
    assert torch.equal(torch.rand(1), before)  # the global RNG is left alone


def test_contradiction_is_refused_before_building(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^pulseppg: checkpoint .* and random_init: true contradict"):
        ENCODERS["pulseppg"](checkpoint=str(tmp_path / "x.pkl"), random_init=True)  # type: ignore[call-arg]


def test_missing_checkpoint_file_says_where_to_get_it(tmp_path: Path) -> None:
    from ppgbench_pl.errors import CheckpointError

    path = tmp_path / "anyppg_ckpt.pth"
    with pytest.raises(CheckpointError) as info:
        ENCODERS["anyppg"](checkpoint=str(path))  # type: ignore[call-arg]
    assert str(info.value).startswith(f"{path}: checkpoint file not found; get ")
    assert PUBLISHED_AT["anyppg"] in str(info.value)


@pytest.mark.parametrize("text", ["None", "null", ""])
def test_no_checkpoint_written_as_text_is_refused(text: str) -> None:
    """``--...checkpoint null`` once reached the encoder as the string 'None' and was opened as a file."""
    with pytest.raises(ConfigError, match=r"^papagei_p: checkpoint '.*' is text, not a file; to give no "):
        ENCODERS["papagei_p"].config_name({"checkpoint": text})
    with pytest.raises(ConfigError, match=r"^mynet: checkpoint '.*' is text, not a file"):
        CustomEncoder(TinyConvNet(), name="mynet", checkpoint=text, **CUSTOM)


@pytest.mark.parametrize("name", [*FOUNDATION_MODELS, "my model"])
def test_job_ids_of_random_init_names_are_filesystem_safe(name: str) -> None:
    jid = job_id(f"{name}{RANDOM_INIT_SUFFIX}", "synthetic-hr", "linear", 42, 0)
    assert re.fullmatch(r"[A-Za-z0-9_.\-]+", jid)
    assert jid != job_id(name, "synthetic-hr", "linear", 42, 0)


def test_fit_with_a_published_config_and_no_checkpoint_refuses(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["fit", "--config", str(ROOT / "configs" / "quickstart.yaml"),
              "--config", str(ROOT / "configs" / "encoders" / "papagei_p.yaml"), "--output_dir", str(out)])
    assert info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err[-1].startswith("ppgbench: error: papagei_p: no checkpoint given") and "Traceback" not in err
    assert not out.exists()


# -- CustomEncoder: weights ---------------------------------------------------------------------------
CUSTOM = {"sampling_rate": 32.0, "pooling": "mean"}


def test_custom_without_checkpoint_refuses() -> None:
    with pytest.raises(ConfigError) as info:
        CustomEncoder(TinyConvNet(), name="mynet", **CUSTOM)
    assert str(info.value) == (
        "mynet: no checkpoint given, so the module would be evaluated with the weights its constructor made; "
        "set checkpoint: <path> (its trained weights), weights_in_module: true if the module loads its own "
        "weights (or has none), or random_init: true to evaluate it untrained (reported as "
        "'mynet (random init)')")
    with pytest.raises(ConfigError, match="^mynet: no checkpoint given"):
        CustomEncoder.config_name({"name": "mynet"})


def test_custom_random_init_and_weights_in_module() -> None:
    untrained = CustomEncoder(TinyConvNet(), name="mynet", random_init=True, **CUSTOM)
    assert untrained.name == "mynet (random init)" == CustomEncoder.config_name({"name": "mynet",
                                                                                 "random_init": True})
    own = CustomEncoder(TinyConvNet(), name="mynet", weights_in_module=True, **CUSTOM)
    assert own.name == "mynet" == CustomEncoder.config_name({"name": "mynet", "weights_in_module": True})
    assert CustomEncoder.config_name({"name": "mynet", "checkpoint": "w.pt"}) == "mynet"


def test_an_unnamed_module_is_named_after_its_class_in_the_plan_and_the_build() -> None:
    """No ``name``: the snake case of the module's class, the same before (plan, dry run) and after building."""
    entry = {"module": {"class_path": "tests.encoders.test_custom.TinyConvNet"}, "weights_in_module": True}
    built = CustomEncoder(TinyConvNet(), weights_in_module=True, **CUSTOM)
    assert built.name == "tiny_conv_net" == CustomEncoder.config_name(entry)
    random = CustomEncoder(TinyConvNet(), random_init=True, **CUSTOM)
    assert random.name == "tiny_conv_net (random init)" == CustomEncoder.config_name(
        {**entry, "weights_in_module": False, "random_init": True})


@pytest.mark.parametrize("args", [
    {"checkpoint": "w.pt", "random_init": True},
    {"checkpoint": "w.pt", "weights_in_module": True},
    {"random_init": True, "weights_in_module": True},
])
def test_custom_contradictions(args: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"^tiny_conv_net: .* contradict each other; set only one$"):
        CustomEncoder(TinyConvNet(), **CUSTOM, **args)


# -- CustomEncoder: output shape checked at build -----------------------------------------------------
class LinearOverTime(nn.Module):
    """A plain Linear over the window: wants [B, T]; given [B, 1, T] it returns [B, 1, D]."""

    def __init__(self, length: int = 320, dim: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(length, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x)


def build(module: nn.Module, **settings: Any) -> CustomEncoder:
    return CustomEncoder(module, sampling_rate=32.0, weights_in_module=True, **settings)


def test_wrong_layout_names_input_shape_bt() -> None:
    """The old behaviour: a traceback at run time and the hint 'set pooling' where the fix is BT."""
    with pytest.raises(ConfigError) as info:
        build(LinearOverTime())
    assert str(info.value) == (
        "linear_over_time: the module's output does not fit the settings: given [2, 1, 320] (input_shape: BCT) "
        "expected embeddings [B, D] for a batch of 2, the module returned [2, 1, 4]; with input_shape: BT "
        "it gives [B, 4] embeddings, so set input_shape: BT")
    assert build(LinearOverTime(), input_shape="BT").embed_dim == 4


def test_pooling_over_a_single_channel_is_not_taken_for_a_fix() -> None:
    with pytest.raises(ConfigError, match=r"pooling: mean over its last axis would leave 1-d embeddings; "
                                          r"with input_shape: BT, pooling: none it gives \[B, 4\]"):
        build(LinearOverTime(), pooling="mean")


def test_module_that_raises_gets_one_line_with_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        build(TinyConvNet(), input_shape="BT", pooling="mean")
    message = str(info.value)
    assert "\n" not in message and "the module raised RuntimeError" in message
    assert message.endswith("so set input_shape: BCT")


def test_asserting_module_and_tuple_output() -> None:
    with pytest.raises(ConfigError, match=r"the module raised AssertionError.*; with input_shape: BT it "
                                          r"gives \[B, 5\] embeddings, so set input_shape: BT$"):
        build(FlatTupleNet())


def test_nothing_fits_says_what_to_check() -> None:
    with pytest.raises(ConfigError) as info:
        build(LinearOverTime(length=100), input_shape="BT")
    message = str(info.value)
    assert "\n" not in message and "no input_shape / pooling setting fixes it" in message
    assert "32 Hz gives 320-sample windows" in message


# -- CustomEncoder: sampling rate ---------------------------------------------------------------------
@pytest.mark.parametrize(("fs", "expected"), [
    (0, "sampling_rate must be a finite positive number of Hz, got 0"),
    (-5.0, "sampling_rate must be a finite positive number of Hz, got -5.0"),
    (float("nan"), "sampling_rate must be a finite positive number of Hz, got nan"),
    (float("inf"), "sampling_rate must be a finite positive number of Hz, got inf"),
    ("64Hz", "sampling_rate must be a number of Hz, got '64Hz'"),
    (1, "sampling_rate 1 Hz is too low for PPG: the pulse (up to ~4 Hz at 240 bpm) is not resolved below "
        "10 Hz; give your model's native rate"),
    (100000, "sampling_rate 100000 Hz is above 2000 Hz: PPG holds nothing there, and every window (and the "
             "embedding cache) grows with the rate; give your model's native rate"),
])
def test_sampling_rate_is_validated(fs: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        CustomEncoder(TinyConvNet(), sampling_rate=fs, pooling="mean", random_init=True)
    assert str(info.value) == expected


@pytest.mark.parametrize("fs", [10, 25.0, 2000])
def test_sane_sampling_rates_build(fs: float) -> None:
    enc = CustomEncoder(TinyConvNet(), sampling_rate=fs, pooling="mean", weights_in_module=True)
    assert enc.sampling_rate == float(fs)
