"""The report marks overlapping cells in every table, counts them, recomputes the findings, and cites the run.

A crafted run on BIDMC (taken from MIMIC-II): ``anyppg`` (card: PulseDB, from MIMIC-III; its records
predate the flag, so the card gives ``source``), ``mynet`` (its records say it was pretrained on BIDMC:
``direct``), ``P`` (nothing declared: ``unknown``) and the PRV control (``none``).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ppgbench_pl.report import build_report
from ppgbench_pl.results.records import job_id, write_job
from tests.cards.bib_parse import pybtex_entries
from tests.report.fabricate import SEEDS, record, spread

TASKS = ("bidmc-resp", "bidmc-spo2")
MODELS = {"anyppg": 2.0, "mynet": 1.0, "P": 3.0, "prv_published": 3.5}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("overlap")
    run = root / "run"
    for task in TASKS:
        for model, mean in MODELS.items():
            for seed, value, base in zip(SEEDS, spread(mean, 0.1), spread(6.0, 0.1), strict=True):
                rec = record(model, task, "linear", seed, 0, value, base)
                if model == "mynet":
                    rec.update(pretraining_overlap="direct", pretraining_data=[{"name": "bidmc",
                                                                                "status": "confirmed"}])
                write_job(run, job_id(model, task, "linear", seed, 0), rec)
    index = build_report([run], root / "report")
    return index.parent


def test_every_main_table_marks_the_overlapping_cells(report):
    md = (report / "tables" / "main_linear.md").read_text(encoding="utf-8")
    for row in md.splitlines():
        if row.startswith("| bidmc-"):
            cells = dict(zip(["", "task", "metric", *MODELS, "constant"], row.split(" | "), strict=False))
            assert cells["mynet"].endswith("‡") and cells["anyppg"].endswith("§")
            assert not cells["P"].endswith(("‡", "§")) and not cells["prv_published"].endswith(("‡", "§"))
    assert "‡ pretrained on this dataset" in md and "§ pretrained on a collection" in md
    assert "pretraining data unknown for P" in md
    tex = (report / "tables" / "main_linear.tex").read_text(encoding="utf-8")
    assert r"$^\ddagger$" in tex and r"\S{}" in tex
    wide = pd.read_csv(report / "tables" / "main_linear.csv")
    assert wide["mynet"].str.endswith("‡").all() and wide["anyppg"].str.endswith("§").all()
    long = pd.read_csv(report / "tables" / "main_cells.csv").set_index(["task", "model"])["pretraining_overlap"]
    assert long[("bidmc-resp", "mynet")] == "direct" and long[("bidmc-resp", "anyppg")] == "source"
    assert long[("bidmc-resp", "P")] == "unknown" and long[("bidmc-resp", "prv_published")] == "none"
    page = (report / "index.html").read_text(encoding="utf-8")
    assert "‡" in page and "§" in page and 'id="overlap"' in page


def test_the_other_tables_mark_the_model_of_a_flagged_cell(report):
    import re

    page = (report / "index.html").read_text(encoding="utf-8")
    # left out: the flags' own list (a mark column) and the tally of paired wins (counts over tasks, no cell)
    page = re.sub(r"<table><caption>(‡ direct, § source|Cells where one side).*?</table>", "", page, flags=re.S)
    # near-chance, paired comparisons and paired effects name models per (task, model) cell
    names = re.findall(r"<td>(mynet|anyppg|P|prv_published)( [‡§])?</td>", page)
    assert ("mynet", " ‡") in names and ("anyppg", " §") in names
    assert all(mark == {"mynet": " ‡", "anyppg": " §"}.get(model, "") for model, mark in names)
    assert len([n for n in names if n[0] == "mynet"]) >= 4  # in more than one table
    assert page.count("Pretraining overlap: ‡ pretrained on this dataset") >= 3  # each such table's legend
    paired = pd.read_csv(report / "tables" / "paired.csv")
    assert "mynet" in set(paired["model_a"]) | set(paired["model_b"])  # the CSVs keep the plain names


def test_findings_count_the_flags_and_are_recomputed_without_them(report):
    findings = (report / "findings.md").read_text(encoding="utf-8")
    assert ("Pretraining overlap: 4 of 8 model x task x regime scores are flagged (2 ‡ pretrained on the "
            "test dataset, 2 § on its source database); 2 have unknown pretraining data") in findings
    assert "Without the 4 flagged scores (4 kept): " in findings
    flagged = pd.read_csv(report / "tables" / "overlap_cells.csv")
    assert set(flagged["pretraining_overlap"]) == {"direct", "source", "unknown"}


def test_references_hold_exactly_what_the_run_used(report):
    text = (report / "references.bib").read_text(encoding="utf-8")
    parsed = pybtex_entries(text)  # a real BibTeX parser, in strict mode
    assert set(parsed) == {"ppgbench", "pimentel2017bidmc", "nie2025anyppg"}  # P, mynet, PRV: no paper
    assert parsed["nie2025anyppg"].fields["eprint"] == "2511.01747"
    methods = (report / "methods.tex").read_text(encoding="utf-8")
    assert r"bidmc~\cite{pimentel2017bidmc}" in methods and r"anyppg~\cite{nie2025anyppg}" in methods
    assert r"\cite{ppgbench}" in methods


def test_the_summary_row_carries_the_flag(tmp_path):
    from ppgbench_pl.results.summary import summarise

    recs = [record("anyppg", "bidmc-resp", "linear", s, 0, 2.0 + s / 10, 6.0) for s in SEEDS]
    recs += [{**record("mynet", "bidmc-resp", "linear", s, 0, 1.0, 6.0), "pretraining_overlap": "direct"}
             for s in SEEDS]
    rows = summarise(recs).set_index("model")["pretraining_overlap"]
    assert rows.to_dict() == {"anyppg": "source", "constant": "none", "mynet": "direct"}
    json.dumps(rows.to_dict())
