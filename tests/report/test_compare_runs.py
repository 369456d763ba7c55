"""``ppgbench compare`` and ``pb.compare``: two runs, one model each, paired per cell (issue 19)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

import ppgbench_pl as pb
from ppgbench_pl.cli import main
from ppgbench_pl.report.load import ReportError
from tests.report.fabricate_grid import write_grid_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    write_grid_run(root / "a", {"P": 0.5, "prv_published": 1.0}, rng_seed=1)
    write_grid_run(root / "b", {"P": 0.5, "prv_published": 1.0}, rng_seed=1)  # the same run, again
    write_grid_run(root / "worse", {"P": 1.6, "Q": 1.7}, rng_seed=2)
    return root


def test_compare_gives_both_intervals_corrected_p_mdd_and_outcome(runs, tmp_path):
    result = pb.compare(runs / "a", runs / "worse", "P", output_dir=tmp_path)
    table = result.table.set_index("task")
    assert list(table.index) == ["synthetic-hr", "synthetic-activity"]
    hr = table.loc["synthetic-hr"]
    assert hr.n_units == 25 and hr.nb_ci_low < hr["diff"] < hr.nb_ci_high and hr.seed_ci_low < hr.seed_ci_high
    assert hr.outcome == "win" and hr.p_bh >= hr.p and hr.mdd > 0
    assert "2 cells" in result.summary and "wins" in result.summary
    assert pd.read_csv(tmp_path / "compare.csv").shape[0] == 2
    assert (tmp_path / "compare.md").read_text().startswith("# ")


def test_a_run_against_itself_ties_everywhere(runs):
    result = pb.compare(runs / "a", runs / "b", "P")
    assert set(result.table["outcome"]) == {"tie"} and not result.refused


def test_mismatched_folds_are_refused_by_name(runs, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(runs / "b", partial)
    for job in (partial / "jobs").glob("*synthetic-hr__linear__seed46__fold4"):
        shutil.rmtree(job)
    result = pb.compare(runs / "a", partial, "P")
    assert result.refused == ["synthetic-hr (linear)"] and list(result.table["task"]) == ["synthetic-activity"]
    for job in (partial / "jobs").glob("*synthetic-activity__linear__seed46__fold4"):
        shutil.rmtree(job)
    with pytest.raises(ReportError, match=r"seeds or folds differ in every shared cell: synthetic-hr \(linear\), "
                                          r"synthetic-activity \(linear\)"):
        pb.compare(runs / "a", partial, "P")


def test_command_prints_the_summary_and_refuses_in_one_line(runs, tmp_path, capsys):
    main(["compare", str(runs / "a"), str(runs / "worse"), "--model", "P", "--model", "P", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith(f"{runs / 'a'}:P vs {runs / 'worse'}:P over 2 cells")
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(runs / "a"), str(runs / "worse")])  # worse has two models: which one?
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "name the ones to compare with --model" in err[0]
