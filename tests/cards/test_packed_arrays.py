"""The prediction arrays of an exported file: packed exactly, checked when read, valid against the schema."""

from __future__ import annotations

import base64
import json
import re
import tracemalloc
import zlib

import numpy as np
import pytest

from ppgbench_pl.results import schemas
from ppgbench_pl.results.packed_arrays import pack, pack_all, unpack, unpack_all

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


def array_errors(packed: dict) -> list[str]:
    """Violations of the export schema's ``$defs/array`` (resolved through the schemas' registry)."""
    from jsonschema import Draft202012Validator

    schema = {"$ref": schemas.load(schemas.EXPORT)["$id"] + "#/$defs/array"}
    validator = Draft202012Validator(schema, registry=schemas.registry())
    return [e.message for e in validator.iter_errors(packed)]


@pytest.mark.parametrize("name", list(ARRAYS))
def test_every_array_reads_back_bit_for_bit(name):
    original = ARRAYS[name]
    packed = json.loads(json.dumps(pack(original)))  # through JSON text, as the file holds it
    back = unpack(packed)
    assert back.shape == original.shape and back.dtype == original.dtype.newbyteorder("<")
    assert back.tobytes() == original.astype(back.dtype).tobytes()
    assert array_errors(packed) == []


def test_text_is_run_length_encoded_in_order():
    packed = pack(ARRAYS["subjects"])
    assert packed["runs"] == [["S01", 20], ["S07", 10], ["S12", 15], ["S01", 5]]
    assert list(unpack(packed)) == list(ARRAYS["subjects"])


FILE = {k: ARRAYS[k] for k in ("y_true", "subjects", "y_pred", "y_prob", "classes")}  # one prediction file


def test_a_whole_prediction_file_round_trips():
    back = unpack_all(pack_all(FILE))
    assert set(back) == set(FILE)
    assert all(np.array_equal(back[k], v) for k, v in FILE.items())


@pytest.mark.parametrize("change, message", [
    ({"subjects": np.repeat(np.array(["S01"]), 51)}, "array 'subjects' has 51 rows but 'y_true' has 50"),
    ({"classes": np.array(["a", "b"])}, "array 'y_prob' of shape [50, 3] does not hold one column per class"),
    ({"y_pred": np.int64(3)}, "array 'y_pred' has no rows"),
])
def test_arrays_of_one_file_that_disagree_in_length_are_refused_before_decoding(change, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        unpack_all(pack_all({**FILE, **change}))


def test_a_zlib_bomb_is_refused_after_inflating_one_byte_more_than_its_shape():
    """2.8 MB of zlib that inflates to 2.9 GB, declared as 8 floats: stopped at 65 bytes, not inflated."""
    bomb = zlib.compress(bytes(64 << 20), 9)  # 64 MiB of zeros (the ratio of a 2.9 GB bomb)
    packed = {"dtype": "<f8", "shape": [8], "zlib_base64": base64.b64encode(bomb).decode()}
    tracemalloc.start()
    with pytest.raises(ValueError, match=r"inflates to more than the 64 bytes of its shape"):
        unpack(packed)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * len(bomb) + (1 << 20)  # the base64 text and its bytes, never the inflated data


@pytest.mark.parametrize("packed, message", [
    ({"dtype": "<U3", "shape": [10**9], "runs": [["S01", 10**9]]}, "more than the 512 MiB an exported array may"),
    ({"dtype": "<f8", "shape": [10**9, 10**9], "zlib_base64": ""}, "more than the 512 MiB an exported array may"),
    ({"dtype": "<U2", "shape": [2], "runs": [["S01", 2]]}, "text longer than its dtype <U2"),
    ({"dtype": "<U999999999", "shape": [1], "runs": [["S", 1]]}, "is not one an exported file holds"),
    ({"dtype": "<U99999999999", "shape": [1], "runs": [["S", 1]]}, "is not one an exported file holds"),
])
def test_a_declared_size_beyond_the_cap_is_refused_before_anything_is_decoded(packed, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        unpack(packed)


@pytest.mark.parametrize("change, message", [
    ({"dtype": "|O"}, "dtype '|O' is not one an exported file holds"),
    ({"shape": [51, 3]}, "'zlib_base64' holds 1200 bytes, not the 1224 bytes of its shape"),
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
    bad = {**pack(ARRAYS["subjects"]), "zlib_base64": "AAAA"}  # text with a numeric field: matches neither
    assert array_errors(bad) != []
    assert schemas.errors({"format": "ppgbench.results"}, schemas.EXPORT) != []
