"""``ppgbench leaderboard``: the page's content, its offline rules, bad input and a torch-free start.

Two exported submissions (:mod:`tests.leaderboard.submissions`): every cell shows the exported mean and CI
as the report formats them, the units and the near-chance dagger sit in the headers, the overlap marks on
the expected cells, each model has its card, and a bad input is one line naming it with nothing written.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ppgbench_pl.cli import main
from ppgbench_pl.leaderboard import build_leaderboard
from ppgbench_pl.report.tables import format_score
from tests.leaderboard.submissions import make_submissions
from tests.test_startup import CLI, heavy_after


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    root = tmp_path_factory.mktemp("leaderboard")
    folders, files = make_submissions(root)
    return root, folders, files


@pytest.fixture(scope="module")
def page(submissions):
    root, _, files = submissions
    return build_leaderboard(files, root / "site")


class _Page(HTMLParser):
    """Tags, the cells by (regime, model, task) and the headers by (regime, task), as text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: dict[tuple[str, str, str], dict[str, str]] = {}
        self.headers: dict[tuple[str, str], dict[str, str]] = {}
        self.regime, self._open, self._text = "", None, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "section" and "data-regime" in attrs:
            self.regime = attrs["data-regime"]
        elif tag == "td" and "data-task" in attrs:
            self._open, self._text = (self.cells, (self.regime, attrs["data-model"], attrs["data-task"]), attrs), []
        elif tag == "th" and attrs.get("data-key") == "task":
            self._open, self._text = (self.headers, (self.regime, attrs["data-task"]), attrs), []

    def handle_data(self, data):
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if self._open is not None and tag in ("td", "th"):
            where, key, attrs = self._open
            where[key] = {**attrs, "text": "".join(self._text)}
            self._open = None


def _parsed(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_exported_cell_is_on_the_page_with_its_ci_and_marks(page, submissions):
    parsed = _parsed(page)
    for path in submissions[2]:
        for cell in json.loads(path.read_text())["cells"]:
            shown = parsed.cells[(cell["regime"], cell["model"], cell["task"])]
            assert float(shown["data-value"]) == pytest.approx(cell["mean"], rel=1e-12)
            assert shown["text"].startswith(format_score(cell["mean"], cell["ci95"], cell["metric"]))
    assert parsed.cells[("linear", "mynet", "bidmc-resp")]["text"].endswith("‡")
    assert parsed.cells[("linear", "mynet", "bidmc-resp")]["data-overlap"] == "direct"
    assert parsed.cells[("linear", "papagei_s", "bidmc-resp")]["text"].endswith("§")
    assert "via mimic-iii" in parsed.cells[("linear", "papagei_s", "bidmc-resp")]["title"]
    unmarked = [k for k, c in parsed.cells.items() if k[2].startswith("synthetic") and re.search("[‡§]", c["text"])]
    assert unmarked == []
    assert parsed.cells[("linear", "papagei_s", "synthetic-age")] == {
        "data-model": "papagei_s", "data-task": "synthetic-age", "data-value": "", "title": "not run", "text": "–"}


def test_headers_carry_units_near_chance_and_what_the_filters_match(page):
    headers = _parsed(page).headers
    assert headers[("linear", "synthetic-hr")]["text"] == "synthetic-hrMAE (bpm) ↓"
    assert headers[("linear", "bidmc-resp")]["text"] == "bidmc-respMAE (breaths/min) ↓"
    assert headers[("linear", "synthetic-stiffness")]["text"] == "synthetic-stiffness †BA ↑"
    assert headers[("linear", "synthetic-stiffness")]["data-higher"] == "1"
    assert headers[("linear", "synthetic-age")]["data-tier"] == "secondary"
    assert headers[("linear", "bidmc-resp")]["data-dataset"] == "bidmc"
    assert set(headers) == {("linear", t) for t in ("synthetic-hr", "synthetic-stiffness", "synthetic-age",
                                                    "bidmc-resp")} | {("mlp", "synthetic-hr")}
    text = page.read_text(encoding="utf-8")
    for select, options in (("f-regime", ["", "linear", "mlp"]), ("f-tier", ["", "primary", "secondary"]),
                            ("f-dataset", ["", "synthetic", "bidmc"])):
        block = re.search(rf'<select id="{select}">(.*?)</select>', text).group(1)
        assert re.findall(r'<option value="([^"]*)">', block) == options
    assert "‡ pretrained on this dataset" in text and "§ pretrained on a collection" in text


def test_each_model_has_its_card(page):
    text = page.read_text(encoding="utf-8")
    cards = dict(re.findall(r'<section class="card" id="[^"]+" data-model="([^"]+)">(.*?)</section>', text, re.S))
    assert set(cards) == {"mynet", "papagei_s"}
    assert "<dt>pretraining data</dt><dd>bidmc</dd>" in cards["mynet"]
    assert "<dd>total 1,234, trainable 1,234</dd>" in cards["mynet"]
    assert "<dt>pretraining data</dt><dd>mesa, mimic-iii, vitaldb (unconfirmed)</dd>" in cards["papagei_s"]
    assert "@inproceedings{pillai2025papagei," in cards["papagei_s"] and "PaPaGei-S" in cards["papagei_s"]
    assert 'href="#card-mynet"' in text and 'href="#card-papagei_s"' in text


def test_the_page_loads_nothing(page):
    text = page.read_text(encoding="utf-8")
    tags = _parsed(page).tags
    assert not {"link", "iframe", "object", "embed", "img", "base"} & {t for t, _ in tags}
    assert [a for t, a in tags if t == "script"] == [{}]  # one inline script, no src
    refs = [v for _, a in tags for k, v in a.items() if k in ("src", "href", "action")]
    assert refs and all(v.startswith("#") for v in refs)  # only links to the page's own cards
    code = re.sub(r"<pre>.*?</pre>", "", text, flags=re.S)  # BibTeX text may name a URL; it is not fetched
    assert not re.search(r"(https?:)?//[a-z]", code, re.IGNORECASE)
    assert "@import" not in text and "url(" not in text and "fetch(" not in text


def test_a_run_folder_gives_the_same_tables_as_its_exported_file(submissions, tmp_path):
    root, folders, files = submissions
    mixed = build_leaderboard([folders[0], files[1]], tmp_path / "mixed")
    assert _parsed(mixed).cells == _parsed(build_leaderboard(files, tmp_path / "files")).cells


@pytest.mark.parametrize("content, message", [
    ("{", "not valid JSON"),
    ('{"format": "other"}', "not a ppgbench results file"),
    (None, "no such file or run folder"),
])
def test_a_bad_input_is_one_line_naming_it_and_nothing_is_written(submissions, tmp_path, capsys, content,
                                                                  message):
    _, _, files = submissions
    bad = tmp_path / "bad.ppgbench.json"
    if content is not None:
        bad.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["leaderboard", str(files[0]), str(bad), "--output", str(tmp_path / "site")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert str(bad) in err and message in err
    assert not (tmp_path / "site").exists()


def test_a_failed_rerun_leaves_the_previous_page_whole(submissions, tmp_path, capsys):
    _, _, files = submissions
    main(["leaderboard", *map(str, files), "--output", str(tmp_path / "site")])
    index = tmp_path / "site" / "index.html"
    assert f"leaderboard: {index}" in capsys.readouterr().out
    before = index.read_bytes()
    document = json.loads(files[1].read_text())
    document["protocol"]["datasets.synthetic.n_folds"] = "10"
    other = tmp_path / "other.ppgbench.json"
    other.write_text(json.dumps(document))
    files0 = json.loads(files[0].read_text())
    files0["protocol"]["datasets.synthetic.n_folds"] = "5"
    first = tmp_path / "first.ppgbench.json"
    first.write_text(json.dumps(files0))
    with pytest.raises(SystemExit):
        main(["leaderboard", str(first), str(other), "--output", str(tmp_path / "site")])
    assert f"{other}: protocol setting datasets.synthetic.n_folds is 10" in capsys.readouterr().err
    assert index.read_bytes() == before and sorted(p.name for p in index.parent.iterdir()) == ["index.html"]


def test_the_command_imports_no_heavy_package(submissions, tmp_path):
    _, _, files = submissions
    args = ["leaderboard", *map(str, files), "--output", str(tmp_path / "site")]
    assert heavy_after(CLI.format(args=args)) == []
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_cell_off_the_published_protocol_is_flagged_and_says_why(submissions, tmp_path):
    """A cell made with a switched setting (here a user callback and refit) carries the ``d`` flag and its
    deviations in its hover text; the other cells of the table carry neither."""
    import shutil

    root, folders, files = submissions
    folder = tmp_path / "run"
    shutil.copytree(folders[0], folder)
    changed = None
    for path in sorted(folder.glob("jobs/*/results.json")):
        rec = json.loads(path.read_text())
        if rec["regime"] == "linear" and rec["task"] == "bidmc-resp":
            path.write_text(json.dumps({**rec, "deviations": ["refit=True", "callback=my.Callback"]}))
            changed = (rec["regime"], rec["model"], rec["task"])
    assert changed is not None
    parsed = _parsed(build_leaderboard([folder, files[1]], tmp_path / "site"))
    cell = parsed.cells[changed]
    assert re.search(r"\[[^\]]*d\]$", cell["text"])
    assert "not the published protocol: refit=True; callback=my.Callback" in cell["title"]
    others = [c for k, c in parsed.cells.items() if k != changed]
    assert others and not any("not the published protocol" in c.get("title", "") for c in others)
    assert not any(re.search(r"\[[^\]]*d\]$", c["text"]) for c in others)
