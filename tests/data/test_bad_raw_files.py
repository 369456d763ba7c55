"""Malformed raw files for all nine datasets: one line naming the file and the problem, never a traceback.

Each case writes the dataset's seeded fixture, damages one file, and preprocesses. A case either fails
with a one-line :class:`~ppgbench_pl.errors.DataError` that names the damaged file (and leaves no tree),
or, where the published protocol drops such input, builds and counts the drop in the marker.
"""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ppgbench_pl.data.datasets import preprocessor
from ppgbench_pl.data.processed import MARKER
from ppgbench_pl.data.registry import get_dataset
from ppgbench_pl.errors import DataError
from tests.data.py2pickle import write_py2_pickle


def empty(path: Path) -> None:
    path.write_bytes(b"")


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def garbage(path: Path) -> None:
    path.write_bytes(b"this is not the file you want\n1,2,3\n")


def wrong_header(path: Path) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[0] = b"foo,bar,baz"
    path.write_bytes(b"\n".join(lines))


def text_sample(path: Path) -> None:
    path.write_bytes(path.read_bytes().rstrip(b"\n") + b"\nabc\n")


def pickle_without_label(path: Path) -> None:
    write_py2_pickle(path, {"signal": {"wrist": {"BVP": [[1.0], [2.0]]}}, "subject": "S1"})


def pickle_of_a_list(path: Path) -> None:
    write_py2_pickle(path, [1, 2, 3])


BAD = "bad"  # expected: one-line DataError naming the file

#: (dataset, damaged file, damage, expected: BAD or the marker's dropped_windows entry, text in the message)
CASES: list[tuple[str, str, Callable[[Path], None], object, str]] = [
    ("dalia", "S1/S1.pkl", empty, BAD, "not a readable pickle"),
    ("dalia", "S1/S1.pkl", truncated, BAD, "not a readable pickle"),
    ("dalia", "S1/S1.pkl", garbage, BAD, "not a readable pickle"),
    ("dalia", "S1/S1.pkl", pickle_without_label, BAD, "label"),
    ("dalia", "S1/S1.pkl", pickle_of_a_list, BAD, ""),
    ("wesad", "S2/S2.pkl", empty, BAD, "not a readable pickle"),
    ("wesad", "S2/S2.pkl", truncated, BAD, "not a readable pickle"),
    ("wesad", "S2/S2.pkl", pickle_without_label, BAD, "label"),
    ("wesad", "S2/S2_quest.csv", empty, BAD, "no '# ORDER' row"),
    ("wesad", "S2/S2_quest.csv", garbage, BAD, "no '# ORDER' row"),
    ("dreamt", "data_64Hz/S002_whole_df.csv", empty, BAD, "unreadable CSV"),
    ("dreamt", "data_64Hz/S002_whole_df.csv", garbage, BAD, "missing column(s) BVP, Sleep_Stage"),
    ("dreamt", "data_64Hz/S002_whole_df.csv", wrong_header, BAD, "missing column(s)"),
    ("ecsmp", "E4/001/BVP.csv", empty, BAD, "unreadable Empatica CSV"),
    ("ecsmp", "E4/001/BVP.csv", garbage, BAD, "sampling-rate lines"),
    ("ecsmp", "E4/001/BVP.csv", text_sample, BAD, "is not a number"),
    ("ecsmp", "EEG_downsample/ECSMP_EEG_001.mat", empty, BAD, "unreadable MATLAB file"),
    ("ecsmp", "EEG_downsample/ECSMP_EEG_001.mat", truncated, BAD, "unreadable MATLAB file"),
    ("ecsmp", "scale.xlsx", empty, BAD, "unreadable workbook"),
    ("ecsmp", "scale.xlsx", truncated, BAD, "unreadable workbook"),
    ("ppgbp", "PPG-BP dataset.xlsx", empty, BAD, "unreadable workbook"),
    ("ppgbp", "PPG-BP dataset.xlsx", truncated, BAD, "unreadable workbook"),
    ("ppgbp", "PPG-BP dataset.xlsx", garbage, BAD, "unreadable workbook"),
    # published: a segment of the wrong length or with non-numbers is dropped; the marker counts it
    ("ppgbp", "0_subject/2_1.txt", empty, {"wrong_length": 1}, ""),
    ("ppgbp", "0_subject/2_1.txt", truncated, {"wrong_length": 1}, ""),
    ("ppgbp", "0_subject/2_1.txt", lambda p: p.write_text("\t".join(["x"] * 2100)), {"non_finite": 1}, ""),
    ("bidmc", "bidmc_csv/bidmc_01_Signals.csv", empty, BAD, "unreadable CSV"),
    ("bidmc", "bidmc_csv/bidmc_01_Signals.csv", wrong_header, BAD, "missing column(s) 'PLETH'"),
    ("bidmc", "bidmc_csv/bidmc_01_Numerics.csv", empty, BAD, "unreadable CSV"),
    ("bidmc", "bidmc_csv/bidmc_01_Numerics.csv", garbage, BAD, "missing column(s)"),
    ("butppg", "100001/100001_PPG.dat", empty, BAD, "unreadable WFDB record samples"),
    ("butppg", "100001/100001_PPG.dat", truncated, BAD, "unreadable WFDB record samples"),
    ("butppg", "100001/100001_PPG.dat", lambda p: p.unlink(), BAD, "WFDB signal file not found"),
    ("butppg", "100001/100001_PPG.hea", empty, BAD, "unreadable WFDB record header"),
    ("butppg", "100001/100001_PPG.hea", garbage, BAD, "unreadable WFDB record header"),
    ("butppg", "quality-hr-ann.csv", empty, BAD, "unreadable CSV"),
    ("butppg", "quality-hr-ann.csv", wrong_header, BAD, "missing column(s) 'ID'"),
    ("butppg", "subject-info.csv", empty, BAD, "unreadable CSV"),
    ("butppg", "subject-info.csv", garbage, BAD, "missing column(s)"),
    ("realworldppg", "train8.xlsx", empty, BAD, "unreadable workbook"),
    ("realworldppg", "train8.xlsx", truncated, BAD, "unreadable workbook"),
    ("realworldppg", "test8.xlsx", garbage, BAD, "unreadable workbook"),
    ("wildppg", "WildPPG_Part_an0.mat", empty, BAD, "unreadable MATLAB file"),
    ("wildppg", "WildPPG_Part_an0.mat", truncated, BAD, "unreadable MATLAB file"),
    ("wildppg", "WildPPG_Part_an0.mat", garbage, BAD, "unreadable MATLAB file"),
]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Each dataset's seeded raw fixture, written once and copied per case."""
    made: dict[str, Path] = {}

    def template(key: str) -> Path:
        if key not in made:
            root = tmp_path_factory.mktemp(f"raw_{key}") / "raw"
            importlib.import_module(f"tests.data.{key}.make_data").make(root)
            made[key] = root
        return made[key]

    return template


@pytest.mark.parametrize(
    ("key", "rel", "damage", "expected", "needle"),
    CASES,
    ids=[f"{c[0]}-{Path(c[1]).name}-{getattr(c[2], '__name__', 'custom')}" for c in CASES],
)
def test_damaged_raw_file(
    templates: Callable[[str], Path],
    tmp_path: Path,
    key: str,
    rel: str,
    damage: Callable[[Path], None],
    expected: object,
    needle: str,
) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(templates(key), raw)
    target = raw / rel
    assert target.is_file(), f"fixture lacks {rel}"
    damage(target)
    out = tmp_path / "out"
    dataset = preprocessor(key)(raw)
    tree = out / "fs_64" / get_dataset(key).display_name
    if expected == BAD:
        with pytest.raises(DataError) as err:
            dataset.build(out, 64)
        message = str(err.value)
        assert "\n" not in message, message
        assert target.name in message and needle in message, message
        assert not tree.exists()
        return
    dataset.build(out, 64)
    dropped = json.loads((tree / MARKER).read_text())["dropped_windows"]
    group = Path(rel).name.split("_")[0]
    assert {k: v for k, v in dropped[group].items() if k in expected} == expected  # type: ignore[operator]


def test_the_corpus_covers_every_dataset() -> None:
    from ppgbench_pl.data.datasets import REAL_DATASETS

    assert {case[0] for case in CASES} == set(REAL_DATASETS)
    assert len(CASES) >= 40


def test_bidmc_marker_counts_each_rejection_reason(templates: Callable[[str], Path], tmp_path: Path) -> None:
    tree = preprocessor("bidmc")(templates("bidmc")).build(tmp_path / "out", 64)
    dropped = json.loads((tree / MARKER).read_text())["dropped_windows"]
    # record 02: a missing numerics row (window 1), NaN PLETH (window 2), an empty SpO2 cell (window 4)
    assert dropped["bidmc02"] == {"label_rows_missing": 1, "non_finite": 1, "label_non_finite": 1}
    assert "bidmc01" not in dropped
