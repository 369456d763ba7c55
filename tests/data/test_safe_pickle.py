"""The restricted unpickler reads Python-2 and Python-3 numpy pickles and refuses any other global."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from ppgbench_pl.data.safe_pickle import load_pickle, lookup, lookup_vector
from ppgbench_pl.errors import DataError
from tests.data.py2pickle import dumps_py2


def _record() -> dict:
    return {
        "signal": {
            "wrist": {
                "BVP": np.linspace(-1, 1, 50).reshape(-1, 1),
                "ACC": np.asfortranarray(np.arange(30, dtype=np.float32).reshape(10, 3)),
            }
        },
        "label": np.arange(7, dtype=np.int32),
        "flags": np.array([True, False]),
        "questionnaire": {"AGE": 31, "WEIGHT": np.float64(70.5), "Gender": " m", "count": np.int64(3)},
        "names": ["S1", "na\xefve"],
        "pair": (1.5, None),
        "tags": {1, 2},
        "z": complex(1, 2),
    }


def _check(loaded: dict) -> None:
    expected = _record()
    np.testing.assert_array_equal(loaded["signal"]["wrist"]["BVP"], expected["signal"]["wrist"]["BVP"])
    acc = loaded["signal"]["wrist"]["ACC"]
    assert acc.dtype == np.float32 and acc.flags.f_contiguous
    np.testing.assert_array_equal(acc, expected["signal"]["wrist"]["ACC"])
    assert loaded["label"].dtype == np.int32
    np.testing.assert_array_equal(loaded["label"], expected["label"])
    np.testing.assert_array_equal(loaded["flags"], expected["flags"])
    assert loaded["questionnaire"] == expected["questionnaire"]
    assert isinstance(loaded["questionnaire"]["WEIGHT"], np.float64)
    assert loaded["names"] == expected["names"] and loaded["pair"] == expected["pair"]
    assert loaded["tags"] == {1, 2} and loaded["z"] == complex(1, 2)


def test_python2_style_pickle_loads(tmp_path: Path) -> None:
    path = tmp_path / "S1.pkl"
    data = dumps_py2(_record())
    assert b"numpy.core.multiarray" in data and b"_codecs" not in data
    path.write_bytes(data)
    _check(load_pickle(path))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_python3_pickles_load(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "S1.pkl"
    path.write_bytes(pickle.dumps(_record(), protocol=protocol))
    _check(load_pickle(path))


class _Evil:
    def __reduce__(self) -> tuple:
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize(
    ("payload", "refused"),
    [
        (pickle.dumps({"signal": _Evil()}, protocol=2), "system"),
        (b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.", "os.system"),
        (b"cbuiltins\neval\n(S'1+1'\ntR.", "builtins.eval"),
        (b"c__builtin__\ngetattr\n(tR.", "__builtin__.getattr"),
        (b"\x80\x02cnumpy\nload\n.", "numpy.load"),
        (b"\x80\x02ccopy_reg\n_reconstructor\n.", "copy_reg._reconstructor"),
    ],
)
def test_other_globals_are_refused(tmp_path: Path, payload: bytes, refused: str) -> None:
    path = tmp_path / "S1.pkl"
    path.write_bytes(payload)
    with pytest.raises(DataError) as info:
        load_pickle(path)
    message = str(info.value)
    assert str(path) in message and refused in message and "\n" not in message


def test_codecs_encode_only_for_latin1(tmp_path: Path) -> None:
    path = tmp_path / "S1.pkl"
    path.write_bytes(b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00abX\x04\x00\x00\x00zlib\x86R.")
    with pytest.raises(DataError, match="S1.pkl"):
        load_pickle(path)


@pytest.mark.parametrize("mangle", ["truncate", "garbage", "empty"])
def test_corrupt_pickles_are_data_errors(tmp_path: Path, mangle: str) -> None:
    path = tmp_path / "S3.pkl"
    data = dumps_py2(_record())
    mangled = {"truncate": data[: len(data) // 2], "garbage": b"\x80\x02\xff\xfe junk", "empty": b""}
    path.write_bytes(mangled[mangle])
    with pytest.raises(DataError) as info:
        load_pickle(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        load_pickle(tmp_path / "nope.pkl")


def test_lookup_messages() -> None:
    data = {"signal": {"wrist": [1, 2]}, "label": np.zeros((4, 3)), "names": np.array(["a", "b"])}
    with pytest.raises(DataError, match=r"f\.pkl: missing key 'signal/chest'"):
        lookup(data, ("signal", "chest"), "f.pkl")
    with pytest.raises(DataError, match="'signal/wrist' is a list, not a dict"):
        lookup(data, ("signal", "wrist", "BVP"), "f.pkl")
    with pytest.raises(DataError, match=r"shape \(4, 3\)"):
        lookup_vector(data, ("label",), "f.pkl")
    with pytest.raises(DataError, match="expected numbers"):
        lookup_vector(data, ("names",), "f.pkl")
    assert lookup_vector({"x": np.ones((5, 1))}, ("x",), "f.pkl").shape == (5,)
