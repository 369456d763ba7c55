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
            "threads": 1, "device": "cpu", "seconds": 30.0, "startup_s": 8.0,
            "coefficients": {"ridge": [0.04, 2.6e-11], "mlp": [0.4, 3.4e-5], "rf_tree": [0.0, 1e-3]},
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
    "a_list": ("[1, 2]", r"the file holds a JSON list, not an object"),
    "a_string": ('"calibrated"', r"the file holds a JSON str, not an object"),
    "encoder_without_name": (json.dumps(without_name()), r"encoders\.0123456789abcdef\.name is missing"),
    "negative_intercept": (json.dumps(edited(coefficients={"ridge": [-2.2e7, 0.0]})),
                           r"coefficients\.ridge\[0\] \(intercept\) is -22000000\.0, outside \[0, 1e\+06\]"),
    "negative_slope": (json.dumps(edited(coefficients={"mlp": [0.1, -1.0]})), r"coefficients\.mlp\[1\] \(slope\)"),
    "nan_slope": (json.dumps(edited(coefficients={"mlp": [0.1, float("nan")]})),
                  r"coefficients\.mlp\[1\] \(slope\) is \"NaN\", not a number"),
    "infinite_startup": (json.dumps(edited(startup_s=float("inf"))), r"startup_s is \"Infinity\", not a number"),
    "overflowing_slope": (json.dumps(good()).replace("3.4e-05", "1e999"), r"coefficients\.mlp\[1\] \(slope\) is inf"),
    "slope_as_text": (json.dumps(edited(coefficients={"mlp": [0.1, "fast"]})), r"coefficients\.mlp\[1\]"),
    "pair_of_three": (json.dumps(edited(coefficients={"mlp": [0.1, 0.2, 0.3]})),
                      r"coefficients\.mlp is \[0\.1, 0\.2, 0\.3\], not \[intercept, slope\]"),
    "unknown_kind": (json.dumps(edited(coefficients={"svm": [0.1, 0.2]})), r"coefficients\.svm is not a kind"),
    "zero_throughput": (json.dumps(edited(encoders={"k": {**ENCODER, "inference_per_s": 0}})),
                        r"encoders\.k\.inference_per_s is 0, outside"),
    "nan_throughput": (json.dumps(edited(encoders={"k": {**ENCODER, "training_per_s": float("nan")}})),
                       r"encoders\.k\.training_per_s is \"NaN\""),
    "encoder_a_list": (json.dumps(edited(encoders={"k": [1]})), r"encoders\.k is \[1\], not an object"),
    "threads_zero": (json.dumps(edited(threads=0)), r"threads is 0, outside"),
    "device_tpu": (json.dumps(edited(device="tpu")), r"device is 'tpu', not cpu or cuda"),
    "coefficients_a_list": (json.dumps(edited(coefficients=[1])), r"coefficients is \[1\], not a dict"),
    "unknown_field": (json.dumps(edited(speed=3)), r"speed is not a calibration field"),
    "calibrated_a_string": (json.dumps(edited(calibrated="yes")), r"calibrated is \"yes\", not a bool"),
    "machine_missing": (json.dumps({k: v for k, v in good().items() if k != "machine"}), r"machine is missing"),
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


@pytest.mark.parametrize("case", ["a_list", "negative_intercept", "nan_slope", "encoder_without_name"])
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

    bounds = edited(coefficients={k: [MAX_SECONDS, MAX_SECONDS] for k in (*KINDS, "rf_tree")}, startup_s=MAX_SECONDS,
                    encoders={"k": {**ENCODER, "inference_per_s": MIN_THROUGHPUT, "training_per_s": MIN_THROUGHPUT}})
    own_calibration.write_text(json.dumps(bounds))
    code, out, err = fit(capsys, "--config", str(base["config"]), "--output_dir", str(tmp_path / "run"), "--dry_run")
    assert code == 0, err
    figures = re.findall(r"(-?[\d.]+(?:e[+-]?\d+)?) (s|min|h|days)\b", out)
    assert figures and all(float(value) >= 0 for value, _ in figures), out
    assert not re.search(r"\b(nan|inf)\b", out, re.I), out
