"""The leaderboard of two real tiny runs' exported files (``tests/cards/test_export.py``'s runs, about 20 s:
marked slow): every model of both files is on the page with its card, and it opens in headless Chromium
without a console message."""

from __future__ import annotations

import shutil

import pytest

from ppgbench_pl.leaderboard import build_leaderboard
from tests.cards.test_export import runs  # noqa: F401 - the module fixture: two real runs and their files
from tests.leaderboard.test_browser import _chromium

pytestmark = pytest.mark.slow


def test_the_leaderboard_of_two_real_exported_runs(runs, tmp_path):  # noqa: F811
    root, files = runs
    page = build_leaderboard(files, tmp_path / "site")
    text = page.read_text(encoding="utf-8")
    for model in ("small_cnn", "mynet", "constant"):
        assert f'<tr data-model="{model}"' in text
    assert 'data-model="small_cnn"><h3>' in text and "<dt>pretraining data</dt><dd>mesa</dd>" in text
    for shared in (text, *(f.read_text(encoding="utf-8") for f in files)):  # issue 32.8: nothing local
        assert str(root) not in shared and str(tmp_path) not in shared
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed")
    done = _chromium(page.as_uri(), tmp_path)
    assert [line for line in done.stderr.splitlines() if "CONSOLE" in line] == []
    assert "rows in 1 table" in done.stdout
