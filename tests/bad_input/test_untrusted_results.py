"""The adversarial results files of issue 30 (points 3-4), through ``report``, ``leaderboard`` and ``pb.load_run``.

Each file (:mod:`tests.bad_input.hostile_exports`, seeded) is refused in one line naming the file and the
field, exit 2, no traceback, no output folder; in a separate process (:mod:`tests.bad_input.untrusted_probe`)
whose peak resident memory stays under 1 GB and where each refusal's traced peak stays under 3 times what
the same reader needs for the valid file it was made from (about the same size).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ppgbench_pl as pb
from ppgbench_pl.errors import DataError
from tests.bad_input.hostile_exports import CASES, bomb_small, valid_export, write_case

REPO = Path(__file__).resolve().parents[2]
ENTRIES = ("report", "leaderboard", "load_run")
GB = 1 << 30


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[list[Path], dict[str, Path], dict[str, Any]]:
    """Valid files of three sizes, every case's file (made from the smallest), what the probe process saw."""
    root = tmp_path_factory.mktemp("untrusted")
    valid = [valid_export(root, seed=0, windows=n) for n in (8, 3_000, 26_000)]
    files = {name: write_case(valid[0], name, root / f"{name}.ppgbench.json") for name in CASES}
    out = root / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tests.bad_input.untrusted_probe", str(out), *map(str, valid),
                           *map(str, files.values())], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300, check=True)
    return valid, files, json.loads(done.stdout.splitlines()[-1])


def same_size(valid: list[Path], path: Path) -> Path:
    """The smallest valid file at least as large as ``path`` (the reference of its memory)."""
    return next(v for v in valid if v.stat().st_size >= path.stat().st_size)


def test_the_valid_files_read_through_every_reader(corpus):
    valid, _, seen = corpus
    for path in valid:
        for entry in ENTRIES:
            run = seen["runs"][f"{path.name}:{entry}"]
            assert run["code"] == 0 and "Traceback" not in run["err"], (entry, run["err"])
    assert seen["maxrss"] < GB


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("name", list(CASES))
def test_each_hostile_file_is_one_line_naming_the_file_and_the_field(corpus, name, entry):
    valid, files, seen = corpus
    run = seen["runs"][f"{files[name].name}:{entry}"]
    err = run["err"].strip()
    assert run["code"] == 2 and "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert re.search(re.escape(f"{files[name]}: ") + CASES[name][1], err), err
    assert not run["written"]  # the output folder was never made
    reference = seen["runs"][f"{same_size(valid, files[name]).name}:{entry}"]["peak"]
    assert run["peak"] < min(GB, 3 * reference), (run["peak"], reference)


def test_the_files_are_the_sizes_of_the_issue(corpus):
    valid, files, _ = corpus
    assert 20_000 < valid[0].stat().st_size < 100_000  # a 60 kB-class file
    assert files["text_array_of_1e9_values"].stat().st_size < 100_000
    assert 2_700_000 < files["zlib_bomb_declared_at_its_size"].stat().st_size < 4_000_000  # 2.8 MB of zlib, base64


def test_a_bomb_in_place_of_8_declared_floats_stops_at_65_bytes(corpus, tmp_path):
    """The file declares the array it should (8 floats); its data is the 2.9 GB bomb. The file opens (the
    declared sizes are right); the array is refused once one byte more than its shape has been inflated:
    ``predictions()`` in one line, the report leaves the job out of Table 4 and names it."""
    import tracemalloc

    valid, _, _ = corpus
    document = json.loads(valid[0].read_text())
    bomb_small(document)
    path = tmp_path / "bomb.ppgbench.json"
    path.write_text(json.dumps(document))
    job = next(r["job_id"] for r in document["records"] if r["task"] == "synthetic-hr")
    results = pb.load_run(path)
    tracemalloc.start()
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: job {job} predictions_repeat0.npz: array "
                                        r"'y_pred': 'zlib_base64' inflates to more than the 64 bytes of its shape$"):
        results.predictions(job)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * path.stat().st_size  # the file's text and its bytes, never the 2.9 GB


def test_predictions_of_a_run_folder_refuse_subjects_that_do_not_match_the_labels(tmp_path):
    from tests.leaderboard.submissions import write_submission

    write_submission(tmp_path / "run", "papagei_s")
    job = sorted((tmp_path / "run" / "jobs").iterdir())[0]
    np.savez(job / "predictions_repeat0.npz", y_true=np.zeros(8), y_pred=np.zeros(8),
             subjects=np.repeat(np.array(["S01"]), 5_000))
    with pytest.raises(DataError, match=r"array 'subjects' has 5000 rows but 'y_true' has 8 \(one row per test "
                                        r"window\)$"):
        pb.load_run(tmp_path / "run").predictions(job.name)


def test_a_run_folder_with_deeply_nested_files_is_read_without_a_traceback(tmp_path, capsys):
    """200,000 nested brackets as a job's ``results.json`` and as ``status.json``: the record is skipped with a
    line naming it, the report is built from the others, ``load_run`` warns; no ``RecursionError``."""
    from ppgbench_pl.cli import main
    from tests.leaderboard.submissions import write_submission

    run = tmp_path / "run"
    write_submission(run, "papagei_s")
    nested = "[" * 200_000 + "]" * 200_000
    damaged = sorted(run.glob("jobs/*/results.json"))[0]
    damaged.write_text(nested)
    (run / "status.json").write_text(nested)
    with pytest.warns(UserWarning, match=rf"skipped {re.escape(str(damaged))}: nests too deeply to be a job record"):
        assert len(pb.load_run(run).records()) == 8
    main(["report", str(run), "--output", str(tmp_path / "report")])
    assert f"{damaged}: nests too deeply to be a job record" in capsys.readouterr().err
    assert (tmp_path / "report" / "index.html").is_file()
