"""Issue 32.8: a leaderboard page and an exported file name their inputs by file name and content digest.

Both are meant to be published, so neither may hold the absolute path of the machine that made them (it
names the user and their folders, and means nothing elsewhere). The inputs here live under pytest's
absolute tmp path; the page and the files are searched for it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import pytest

from ppgbench_pl.leaderboard import build_leaderboard
from ppgbench_pl.results.provenance import content_digest, input_label
from tests.leaderboard.submissions import make_submissions


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    root = tmp_path_factory.mktemp("local_paths")
    folders, files = make_submissions(root)
    return root, folders, files


def _assert_no_local_path(text: str, root) -> None:
    for spelling in {str(root), str(root.resolve()), root.parent.name}:
        assert spelling not in text, spelling


def test_an_exported_file_names_its_run_by_name_and_digest(submissions):
    root, folders, files = submissions
    for folder, path in zip(folders, files, strict=True):
        text = path.read_text(encoding="utf-8")
        _assert_no_local_path(text, root)
        source = json.loads(text)["run"]["source"]
        assert source == f"{folder.name} (sha256:{content_digest(folder)})"
        assert json.loads(text)["predictions_left_out"]  # the fabricated runs wrote no prediction files
        assert all(line.startswith("jobs/") for line in json.loads(text)["predictions_left_out"])


def test_a_leaderboard_page_names_inputs_by_name_and_digest(submissions, tmp_path):
    root, folders, files = submissions
    broken = shutil.copytree(folders[0], tmp_path / "broken_run")
    next(broken.glob("jobs/*/results.json")).write_text("{")  # a record the loader lists as unreadable
    page = build_leaderboard([broken, files[1]], tmp_path / "site").read_text(encoding="utf-8")
    _assert_no_local_path(page, root)
    _assert_no_local_path(page, tmp_path)
    digest = hashlib.sha256(files[1].read_bytes()).hexdigest()
    assert f"papagei_s.ppgbench.json (sha256:{digest[:16]})" in page  # in the header and on its card
    assert page.count(input_label(broken)) == 2  # in the header and on mynet's card
    assert re.search(r"could not be read.*<li>broken_run/jobs/[^/<]+/results\.json: ", page)


def test_a_run_folder_digest_follows_its_records(tmp_path, submissions):
    _, folders, _ = submissions
    copy = shutil.copytree(folders[0], tmp_path / folders[0].name)
    assert content_digest(copy) == content_digest(folders[0])  # where it lies does not matter
    record = next(copy.glob("jobs/*/results.json"))
    record.write_text(record.read_text().replace('"seconds": 0.1', '"seconds": 0.2'))
    assert content_digest(copy) != content_digest(folders[0])
