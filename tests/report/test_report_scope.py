"""Issue 32.6: a smoke or off-protocol report says so at the top and shows only what applies to its run."""

import re
from html.parser import HTMLParser

import pytest

from ppgbench_pl.report import build_report
from ppgbench_pl.results.records import write_job
from tests.report.fabricate import record, spread, write_cell

TASKS = (("synthetic-hr", 9.0, 10.0), ("synthetic-age", 12.0, 15.0), ("synthetic-activity", 0.7, 0.5))


class _Outline(HTMLParser):
    """The page as (tag, text) for headings, paragraphs, lists and tables, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, str]] = []
        self._open: list[str] = []
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("h1", "h2", "h3", "p", "ul", "table", "title", "details") and not self._open:
            self._open.append(tag)
            self._text = []
        elif self._open:
            self._open.append(tag)

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()
            if not self._open:
                self.blocks.append((tag, " ".join("".join(self._text).split())))

    def handle_data(self, data):
        if self._open:
            self._text.append(data)


def _outline(text: str) -> list[tuple[str, str]]:
    parser = _Outline()
    parser.feed(text)
    return parser.blocks


def _write_run(run, budget, seeds, regime="linear"):
    for task, value, base in TASKS:
        for seed in seeds:
            for model, v in (("P", value), ("prv_neurokit2", (value + base) / 2)):
                rec = record(model, task, regime, seed, 0, v + 0.01 * seed, base)
                rec["budget"] = budget
                write_job(run, rec["job_id"], rec)
    settled = record("P", "synthetic-stiffness", regime, seeds[0], 0, None, None, status="not_evaluable")
    settled["error"] = "not evaluable: one class in the test fold"
    write_job(run, settled["job_id"], settled)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    root = tmp_path_factory.mktemp("smoke")
    _write_run(root / "run", "smoke", seeds=[1])
    return build_report([root / "run"], root / "report").read_text(encoding="utf-8")


def test_title_and_first_paragraph_say_smoke(smoke):
    blocks = _outline(smoke)
    assert blocks[0][0] == "title" and "SMOKE" in blocks[0][1]
    assert blocks[1][0] == "h1" and "SMOKE" in blocks[1][1]
    assert blocks[2][0] == "p" and blocks[2][1].startswith("SMOKE BUDGET: not the published protocol")
    assert "(all scores of this report)" in blocks[2][1]


def test_not_evaluable_jobs_are_not_failed(smoke):
    meta = next(text for tag, text in _outline(smoke) if text.startswith("Run folders:"))
    assert "1 not evaluable" in meta and "0 failed" in meta
    assert "Failed jobs" not in smoke and "Jobs not evaluable" in smoke


def test_nothing_determined_reads_undetermined(smoke):
    blocks = _outline(smoke)
    headline = blocks[blocks.index(("h2", "Headline findings")) + 1][1]
    assert "Near chance: undetermined in all 3 task x regime cells" in headline
    assert "Controls: undetermined in all 3 assessable cells" in headline
    assert "0 of 3" not in headline and "In 0 of" not in headline


def test_no_raw_latex_and_no_section_that_does_not_apply(smoke):
    assert "\\cite" not in smoke and "~\\" not in smoke
    assert "ppgbench [ppgbench]" in smoke  # the methods sentence as text, citations as [key]
    assert "Search-noise sensitivity" not in smoke  # a linear-only run has no search to repeat
    assert "Wilcoxon cannot go below" not in smoke  # one seed: no test was made
    assert "no confidence interval, t-test or Wilcoxon test can be made" in smoke


def test_the_main_table_follows_the_summary(smoke):
    blocks = _outline(smoke)
    at = blocks.index(("h2", "Headline findings"))
    assert blocks[at + 1][0] == "ul"  # the headline bullets: the summary
    assert blocks[at + 2] == ("h2", "Main tables")
    assert blocks[at + 3] == ("h3", "linear") and blocks[at + 4][0] == "table"


def test_a_published_run_has_a_plain_title_and_the_sections_that_apply(tmp_path):
    _write_run(tmp_path / "run", "published", seeds=[1, 2, 3, 4, 5], regime="mlp")
    page = build_report([tmp_path / "run"], tmp_path / "report").read_text(encoding="utf-8")
    blocks = _outline(page)
    assert blocks[0] == ("title", "ppgbench report") and blocks[1] == ("h1", "ppgbench report")
    assert blocks[2][1].startswith("Run folders:")
    assert "SMOKE" not in page and "NOT THE PUBLISHED PROTOCOL" not in page
    assert "Search-noise sensitivity" in page  # the MLP probe searches: the section applies
    assert "With 5 seeds Wilcoxon cannot go below p = 0.0625." in page


def test_a_switched_setting_says_not_the_published_protocol(tmp_path):
    run = tmp_path / "run"
    for seed, value, base in zip((1, 2, 3), spread(9.0, 0.5, 3), spread(10.0, 0.1, 3), strict=True):
        rec = record("P", "synthetic-hr", "linear", seed, 0, float(value), float(base))
        rec.update(budget="published", deviations=["refit=True"])
        write_job(run, rec["job_id"], rec)
    write_cell(run, "Q", "synthetic-hr", "linear", spread(9.5, 0.5, 3), spread(10.0, 0.1, 3), seeds=(1, 2, 3))
    page = build_report([run], tmp_path / "report").read_text(encoding="utf-8")
    blocks = _outline(page)
    assert blocks[1] == ("h1", "ppgbench report: NOT THE PUBLISHED PROTOCOL")
    assert re.match(r"NOT THE PUBLISHED PROTOCOL: refit=True .*\(1 of 2 scores of this report\)", blocks[2][1])


def test_a_cell_mixing_budgets_is_smoke(tmp_path):
    run = tmp_path / "run"
    for seed, value, base in zip((1, 2, 3), spread(9.0, 0.5, 3), spread(10.0, 0.1, 3), strict=True):
        rec = record("P", "synthetic-hr", "linear", seed, 0, float(value), float(base))
        rec["budget"] = "smoke" if seed == 3 else "published"  # a smoke job resumed into a published folder
        write_job(run, rec["job_id"], rec)
    blocks = _outline(build_report([run], tmp_path / "report").read_text(encoding="utf-8"))
    assert blocks[1] == ("h1", "ppgbench report: SMOKE (not the published protocol)")
    assert blocks[2][1].startswith("SMOKE BUDGET: not the published protocol")
