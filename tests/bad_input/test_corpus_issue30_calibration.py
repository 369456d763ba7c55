"""The bad-input corpus, issue 30 item 5: a calibration file is validated like any input.

Each damaged file makes ``ppgbench calibrate --show`` and the dry run's estimate refuse in one line naming
the file and the field (never a traceback, never ``about -2.2e+07 s`` or ``nan days``); a valid file at the
bounds gives an estimate whose every figure is finite and non-negative.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ppgbench_pl.benchmark.cost_model import FORMAT, MAX_SECONDS, MIN_THROUGHPUT, calibration_path, machine_description
from tests.bad_input.test_corpus import base, check, fit  # noqa: F401 - base: fixture
from tests.cli_helpers import run_cli

ENCODER = {"name": "small_cnn", "inference_per_s": 900.0, "training_per_s": 300.0, "embed_dim": 64, "device": "cpu",
           "training": "measured"}


def good() -> dict[str, Any]:
    """A valid calibration of this machine."""
    return {"format": FORMAT, "machine": machine_description(), "calibrated": True, "created": "2026-12-05T00:00:00",
            "device": "cpu", "seconds": 30.0, "startup_s": 8.0, "rates": {"ridge": 0.016, "mlp": 3.4e-3},
            "encoders": {"0123456789abcdef": dict(ENCODER)}}


def edited(**changes: Any) -> dict[str, Any]:
    out = good()
    out.update(changes)
    return out


def without_name() -> dict[str, Any]:
    out = good()
    del out["encoders"]["0123456789abcdef"]["name"]
    return out


#: case -> (file text, the field the one-line refusal names)
CASES: dict[str, tuple[str, str]] = {
    "a_list": ("[1, 2]", r"\[1, 2\] is not of type 'object'"),
    "a_string": ('"calibrated"', r"'calibrated' is not of type 'object'"),
    "encoder_without_name": (json.dumps(without_name()), r"encoders\.0123456789abcdef: 'name' is a required property"),
    "negative_rate": (json.dumps(edited(rates={"ridge": -2.2e7})),
                      r"rates\.ridge: -22000000\.0 is less than the minimum of 0"),
    "nan_rate": (json.dumps(edited(rates={"mlp": float("nan")})), r"rates\.mlp: 'NaN' is not of type 'number'"),
    "infinite_startup": (json.dumps(edited(startup_s=float("inf"))), r"startup_s: 'Infinity' is not of type"),
    "overflowing_rate": (json.dumps(good()).replace("0.0034", "1e999"),
                         r"rates\.mlp: inf is greater than the maximum of 1000000"),
    "rate_as_text": (json.dumps(edited(rates={"mlp": "fast"})), r"rates\.mlp: 'fast' is not of type 'number'"),
    "rate_a_bool": (json.dumps(edited(rates={"mlp": True})), r"rates\.mlp: True is not of type 'number'"),
    "unknown_kind": (json.dumps(edited(rates={"svm": 0.1})), r"rates: Additional properties .*'svm' was unexpected"),
    "zero_throughput": (json.dumps(edited(encoders={"k": {**ENCODER, "inference_per_s": 0}})),
                        r"encoders\.k\.inference_per_s: 0 is less than the minimum"),
    "nan_throughput": (json.dumps(edited(encoders={"k": {**ENCODER, "training_per_s": float("nan")}})),
                       r"encoders\.k\.training_per_s: 'NaN' is not of type"),
    "encoder_a_list": (json.dumps(edited(encoders={"k": [1]})), r"encoders\.k: \[1\] is not of type 'object'"),
    "negative_seconds": (json.dumps(edited(seconds=-1)), r"seconds: -1 is less than the minimum of 0"),
    "device_tpu": (json.dumps(edited(device="tpu")), r"device: 'tpu' is not one of \['cpu', 'cuda'\]"),
    "rates_a_list": (json.dumps(edited(rates=[1])), r"rates: \[1\] is not of type 'object'"),
    "unknown_field": (json.dumps(edited(speed=3)), r"Additional properties are not allowed \('speed' was unexpected\)"),
    "calibrated_a_string": (json.dumps(edited(calibrated="yes")), r"calibrated: 'yes' is not of type 'boolean'"),
    "machine_missing": (json.dumps({k: v for k, v in good().items() if k != "machine"}),
                        r"'machine' is a required property"),
}


@pytest.fixture(autouse=True)
def own_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PPGBENCH_CALIBRATION_DIR", str(tmp_path / "calibration"))
    calibration_path().parent.mkdir(parents=True)
    return calibration_path()


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_calibration_is_one_line_naming_the_field(own_calibration, capsys, case):
    text, field = CASES[case]
    own_calibration.write_text(text)
    check(run_cli(["calibrate", "--show"], capsys), 2,
          rf"^ppgbench: error: {re.escape(str(own_calibration))}: not a valid calibration: {field}.*; run "
          r"`ppgbench calibrate --force` to measure again$")


@pytest.mark.parametrize("case", ["a_list", "negative_rate", "nan_rate", "encoder_without_name"])
def test_the_dry_run_refuses_a_damaged_calibration_in_one_line(base, own_calibration, tmp_path, capsys,  # noqa: F811
                                                                 case):
    text, field = CASES[case]
    own_calibration.write_text(text)
    out = tmp_path / "run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), "--dry_run"), 2, field)
    assert not out.exists()


def test_estimates_from_a_file_at_the_bounds_are_finite_and_non_negative(base, own_calibration, tmp_path,  # noqa: F811
                                                                         capsys):
    from ppgbench_pl.benchmark.cost_model import KINDS

    bounds = edited(rates=dict.fromkeys(KINDS, MAX_SECONDS), startup_s=MAX_SECONDS,
                    encoders={"k": {**ENCODER, "inference_per_s": MIN_THROUGHPUT, "training_per_s": MIN_THROUGHPUT}})
    own_calibration.write_text(json.dumps(bounds))
    code, out, err = fit(capsys, "--config", str(base["config"]), "--output_dir", str(tmp_path / "run"), "--dry_run")
    assert code == 0, err
    figures = re.findall(r"(-?[\d.]+(?:e[+-]?\d+)?) (s|min|h|days)\b", out)
    assert figures and all(float(value) >= 0 for value, _ in figures), out
    assert not re.search(r"\b(nan|inf)\b", out, re.I), out
