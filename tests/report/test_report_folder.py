"""Issue 30.4: a report folder is all of one report or untouched, whatever happens while it is written."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ppgbench_pl.atomic_io import dir_mode
from ppgbench_pl.locks import file_lock
from ppgbench_pl.report import ReportError, build_report
from ppgbench_pl.report import folder as report_folder
from tests.report.fabricate import spread, write_cell

ROOT = Path(__file__).resolve().parents[2]


def _run(path: Path, model: str) -> Path:
    write_cell(path, model, "synthetic-hr", "linear", spread(9.0, 0.5), spread(10.0, 0.2))
    write_cell(path, "prv_neurokit2", "synthetic-hr", "linear", spread(9.5, 0.5), spread(10.0, 0.2))
    return path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


@pytest.fixture
def old_report(tmp_path):
    """A report of model OLDNET in ``tmp_path/rep``, and a run of model NEWNET to build over it."""
    report = tmp_path / "rep"
    build_report([_run(tmp_path / "old", "OLDNET")], report)
    return report, _snapshot(report), _run(tmp_path / "new", "NEWNET")


def test_an_error_mid_write_leaves_the_old_report_whole(old_report, monkeypatch):
    report, before, new = old_report

    def fail(*args, **kwargs):  # tables, CSVs, figures, methods.tex of the new report are written by now
        raise RuntimeError("disk trouble")

    monkeypatch.setattr("ppgbench_pl.report.build.job_lists", fail)
    with pytest.raises(RuntimeError, match="disk trouble"):
        build_report([new], report)
    assert _snapshot(report) == before
    assert _siblings(report) == []  # the half-built folder is gone
    monkeypatch.undo()
    build_report([new], report)
    page = (report / "index.html").read_text(encoding="utf-8")
    assert "NEWNET" in page and "OLDNET" not in page
    assert "OLDNET" not in (report / "tables" / "main_linear.csv").read_text()
    assert report.stat().st_mode & 0o777 == dir_mode()  # as a folder made by mkdir, not mkdtemp's 0700


def test_a_kill_mid_write_leaves_the_old_report_and_the_rerun_gives_the_new_one(old_report):
    report, before, new = old_report
    script = ("import os, signal, sys\n"
              "import ppgbench_pl.report.build as top\n"
              "from ppgbench_pl.report import build_report\n"
              "top.job_lists = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
              "build_report([sys.argv[1]], sys.argv[2])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, str(new), str(report)], env=env, capture_output=True,
                          timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert _snapshot(report) == before
    stale = _siblings(report)
    assert len(stale) == 1 and stale[0].startswith(".rep.building-")  # the dead build's folder, beside it
    build_report([new], report)
    assert "NEWNET" in (report / "index.html").read_text(encoding="utf-8")
    assert _siblings(report) == []  # the next build removed it


def test_the_swap_without_an_atomic_exchange_gives_the_same_report(old_report, monkeypatch):
    report, _, new = old_report
    monkeypatch.setattr(report_folder, "_exchange", lambda a, b: False)
    build_report([new], report)
    assert "NEWNET" in (report / "index.html").read_text(encoding="utf-8")
    assert (report / report_folder.MARKER).is_file() and _siblings(report) == []


def test_a_live_build_of_the_same_folder_is_left_alone(old_report):
    report, _, new = old_report
    live = report.parent / ".rep.building-live"
    live.mkdir()
    with file_lock(live / report_folder.MARKER):  # another process building the same report
        build_report([new], report)
        assert live.is_dir()


def test_a_folder_of_other_files_is_refused_and_untouched(tmp_path):
    target = tmp_path / "papers"
    target.mkdir()
    (target / "draft.tex").write_text("mine")
    with pytest.raises(ReportError, match=r"papers: holds files that are not a ppgbench report"):
        build_report([_run(tmp_path / "run", "P")], target)
    assert [p.name for p in target.iterdir()] == ["draft.tex"]
    assert _siblings(target) == []


def test_a_report_made_before_the_marker_is_replaced(tmp_path):
    target = tmp_path / "rep"
    (target / "tables").mkdir(parents=True)
    for name in ("index.html", "findings.md", "protocol.md"):
        (target / name).write_text("old")
    build_report([_run(tmp_path / "run", "P")], target)
    assert (target / "index.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_link_to_a_report_folder_stays_a_link(old_report):
    report, _, new = old_report
    link = report.parent / "latest"
    link.symlink_to(report.name)
    build_report([new], link)
    assert link.is_symlink() and "NEWNET" in (report / "index.html").read_text(encoding="utf-8")
