"""Issue 30.5: strings of an input never run in LaTeX and never choose where a file goes."""

import re

import pandas as pd

from ppgbench_pl.report import build_report, sections, tables
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.folder import Page
from ppgbench_pl.report.sections import ReportOptions
from ppgbench_pl.report.tables import safe_stem
from tests.report.fabricate import record, spread, write_cell

PAYLOAD = "x}\\immediate\\write18{touch pwned}\\input{/etc/hostname}\\def\\x{"
#: The commands ppgbench itself writes into .tex files; anything else came from an input.
OWN_COMMANDS = {"cite", "textbackslash", "textasciitilde", "textbar", "textless", "textgreater", "textbf",
                "begin", "end", "centering", "small", "caption", "toprule", "midrule", "bottomrule",
                "usepackage", "pm", "times", "downarrow", "uparrow", "dagger", "ddagger", "S"}


def _commands(tex: str) -> set[str]:
    return set(re.findall(r"\\([A-Za-z]+)", tex))


def test_methods_tex_and_tables_escape_a_model_name(tmp_path):
    run = tmp_path / "run"
    write_cell(run, PAYLOAD, "synthetic-hr", "linear", spread(9.0, 0.5), spread(10.0, 0.2))
    write_cell(run, "papagei_s", "synthetic-hr", "linear", spread(9.5, 0.5), spread(10.0, 0.2))
    index = build_report([run], tmp_path / "report")
    methods = (index.parent / "methods.tex").read_text(encoding="utf-8")
    assert "\\input{" not in methods and "\\immediate" not in methods and "\\write18" not in methods
    assert _commands(methods) <= OWN_COMMANDS
    assert "x\\}\\textbackslash{}immediate\\textbackslash{}write18\\{touch pwned\\}" in methods
    assert "papagei\\_s~\\cite{" in methods  # a catalog model is still cited, its name escaped
    for tex in (index.parent / "tables").glob("*.tex"):
        assert _commands(tex.read_text(encoding="utf-8")) <= OWN_COMMANDS, tex.name
    page = index.read_text(encoding="utf-8")
    assert "\\cite" not in page and "papagei_s [" in page  # the page has the plain-text sentence


def test_safe_stem_keeps_plain_names_and_confines_the_rest():
    assert safe_stem("linear") == "linear" and safe_stem("label_efficiency") == "label_efficiency"
    names = ["../../x", "..", ".hidden", "a/b", "a\\b", "", "é", "a" * 300, "a/b/", "a_b"]
    stems = [safe_stem(n) for n in names]
    assert len(set(stems)) == len(stems)  # two names never share a file
    for stem in stems:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", stem) and ".." not in stem and len(stem) < 80


def _scores(regime: str) -> Scores:
    records = []
    for model, mean in (("P", 9.0), ("Q", 9.5), ("R", 9.8)):
        for task in ("synthetic-hr", "synthetic-age"):
            for seed, value, base in zip((1, 2, 3, 4, 5), spread(mean, 0.3), spread(10.0, 0.1), strict=True):
                records.append(record(model, task, regime, seed, 0, float(value), float(base)))
    return Scores(records)


def test_a_regime_name_cannot_write_outside_tables_or_figures(tmp_path):
    regime = "../../escaped"
    out = tmp_path / "deep" / "report"
    (out / "tables").mkdir(parents=True)
    scores = _scores(regime)
    rule = Rule("ci")
    from ppgbench_pl.report.findings import chance_cells

    cells = tables.main_cells(scores, rule, chance_cells(scores, rule))
    opts = ReportOptions()
    sections.main_tables(Page("t", out), scores, rule, cells, out, opts)
    sections.comparisons(Page("t", out), scores, out, opts)
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    stem = safe_stem(regime)
    assert {f"tables/main_{stem}.tex", f"figures/cd_{stem}.png", f"figures/cd_{stem}.svg"} <= written
    assert sorted(p.name for p in tmp_path.rglob("*escaped*")) == sorted(
        p.name for p in out.rglob("*escaped*"))  # nothing outside the report folder
    assert pd.read_csv(out / "tables" / f"main_{stem}.csv")["task"].str.startswith("synthetic").all()
