"""The prediction arrays of an exported file: packed exactly, checked when read, valid against the schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppgbench_pl.results.packed_arrays import pack, pack_all, unpack, unpack_all
from tests.schema_check import errors, validate

RNG = np.random.default_rng(0)
ARRAYS = {
    "y_prob": RNG.dirichlet([1, 1, 1], size=50),  # float64, 2-D
    "y_true": RNG.normal(60, 10, 50).astype(np.float32),
    "y_pred": RNG.integers(0, 3, 50),
    "mask": RNG.random(50) > 0.5,
    "classes": np.array(["low", "mid", "high"]),
    "subjects": np.repeat(np.array(["S01", "S07", "S12", "S01"]), [20, 10, 15, 5]),
    "odd": np.array([np.nan, -0.0, np.inf, 1e-310], dtype=">f8"),  # big-endian, NaN, signed zero, subnormal
    "empty": np.zeros((0, 4), dtype=np.int16),
}


def array_schema() -> dict:
    from tests.schema_check import SCHEMAS

    return json.loads((SCHEMAS / "ppgbench-results.schema.json").read_text())


@pytest.mark.parametrize("name", list(ARRAYS))
def test_every_array_reads_back_bit_for_bit(name):
    original = ARRAYS[name]
    packed = json.loads(json.dumps(pack(original)))  # through JSON text, as the file holds it
    back = unpack(packed)
    assert back.shape == original.shape and back.dtype == original.dtype.newbyteorder("<")
    assert back.tobytes() == original.astype(back.dtype).tobytes()
    schema = array_schema()
    assert errors(packed, schema["$defs"]["array"], schema) == []


def test_text_is_run_length_encoded_in_order():
    packed = pack(ARRAYS["subjects"])
    assert packed["runs"] == [["S01", 20], ["S07", 10], ["S12", 15], ["S01", 5]]
    assert list(unpack(packed)) == list(ARRAYS["subjects"])


def test_a_whole_prediction_file_round_trips():
    back = unpack_all(pack_all(ARRAYS))
    assert set(back) == set(ARRAYS)
    assert all(np.array_equal(back[k], v, equal_nan=v.dtype.kind == "f") for k, v in ARRAYS.items())


@pytest.mark.parametrize("change, message", [
    ({"dtype": "|O"}, "dtype '|O' is not one an exported file holds"),
    ({"shape": [51, 3]}, "'zlib_base64' holds 1200 bytes, not the 153 x <f8 of shape [51, 3]"),
    ({"shape": [-1]}, "'shape' must be a list of non-negative integers"),
    ({"zlib_base64": "not base64!"}, "'zlib_base64' does not decode"),
    ({"zlib_base64": "eNo="}, "'zlib_base64' does not decode"),
])
def test_a_damaged_numeric_array_is_one_line(change, message):
    packed = {**pack(ARRAYS["y_prob"]), **change}
    with pytest.raises(ValueError, match=r"^array 'y_prob': ") as info:
        unpack_all({"y_prob": packed})
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("runs, message", [
    ([["S01", 20], ["S07", 10]], "'runs' count 30 values, not the 50 of shape [50]"),
    ([["S01", 0], ["S07", 50]], "'runs' must be a list of [text, positive count] pairs"),
    ([["S01", 50, 1]], "'runs' must be a list of [text, positive count] pairs"),
])
def test_damaged_text_is_one_line(runs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        unpack({**pack(ARRAYS["subjects"]), "runs": runs})


def test_what_cannot_be_packed_is_refused():
    with pytest.raises(ValueError, match="dtype object cannot be exported"):
        pack(np.array([{"a": 1}], dtype=object))


def test_the_schema_refuses_a_malformed_array():
    schema = array_schema()
    bad = {**pack(ARRAYS["subjects"]), "zlib_base64": "AAAA"}  # text with a numeric field: matches neither
    assert errors(bad, schema["$defs"]["array"], schema) != []
    assert validate({"format": "ppgbench.results"}, "ppgbench-results.schema.json") != []
