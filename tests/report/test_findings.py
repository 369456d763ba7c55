import pytest

from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.findings import chance_cells, control_cells, headline
from ppgbench_pl.report.load import load_runs
from tests.report.fabricate import spread, write_cell

BASE_MAE = spread(10.0, 1.0)


@pytest.fixture(scope="module")
def chance_scores(tmp_path_factory):
    run = tmp_path_factory.mktemp("chance")
    # X: 0.5 better on every seed, but the CIs overlap (0.5 <= ~1.0 + 1.0)
    noise = [0.01, -0.01, 0.02, -0.02, 0.0]
    values = [b - 0.5 + e for b, e in zip(BASE_MAE, noise, strict=True)]
    write_cell(run, "P", "synthetic-hr", "linear", values, BASE_MAE)
    # Y: clearly above chance
    write_cell(run, "P", "synthetic-activity", "linear", spread(0.8, 0.02), spread(0.5, 0.01))
    # Z: worse than the baseline
    write_cell(run, "P", "synthetic-stiffness", "linear", spread(0.45, 0.01), spread(0.5, 0.01))
    # W: a single seed, so no CI
    write_cell(run, "P", "synthetic-age", "linear", [9.0], [10.0], seeds=[1])
    return Scores(load_runs([run]).records)


def _status(frame):
    return {r.task: r.status for r in frame.itertuples()}


@pytest.mark.parametrize(("rule", "expected"), [
    ("ci", {"synthetic-hr": "near_chance", "synthetic-activity": "above_chance",
            "synthetic-stiffness": "near_chance", "synthetic-age": "undetermined"}),
    ("mean", {"synthetic-hr": "above_chance", "synthetic-activity": "above_chance",
              "synthetic-stiffness": "near_chance", "synthetic-age": "above_chance"}),
    ("paired", {"synthetic-hr": "above_chance", "synthetic-activity": "above_chance",
                "synthetic-stiffness": "near_chance", "synthetic-age": "undetermined"}),
])
def test_near_chance_under_each_rule(chance_scores, rule, expected):
    frame = chance_cells(chance_scores, Rule(rule))
    assert _status(frame) == expected
    head = headline(frame, control_cells(chance_scores, Rule(rule)), Rule(rule))
    near = sorted(t for t, s in expected.items() if s == "near_chance")
    assert sorted(t for t, _ in head.near_chance) == near
    assert head.n_cells == 4
    judged = sum(s != "undetermined" for s in expected.values())  # an undetermined cell is not counted
    scope = "judged " if judged < 4 else ""
    assert head.lines()[0].startswith(f"{len(near)} of {judged} {scope}task x regime cells are near chance")


def test_findings_with_nothing_determined_say_undetermined(tmp_path):
    """Issue 32.6: three one-seed cells are undetermined, not "0 of 3 cells are near chance"."""
    for task, model, base in (("synthetic-hr", 9.0, 10.0), ("synthetic-age", 9.0, 10.0),
                              ("synthetic-activity", 0.7, 0.5)):  # each better than its baseline, one seed
        write_cell(tmp_path, "P", task, "linear", [model], [base], seeds=[1])
        write_cell(tmp_path, "prv_neurokit2", task, "linear", [(model + base) / 2], [base], seeds=[1])
    scores = Scores(load_runs([tmp_path]).records)
    head = headline(chance_cells(scores, Rule("ci")), control_cells(scores, Rule("ci")), Rule("ci"))
    chance, controls = head.lines()[:2]
    assert chance.startswith("Near chance: undetermined in all 3 task x regime cells")
    assert "0 of" not in chance and "no model meaningfully beats" not in chance
    assert controls.startswith("Controls: undetermined in all 3 assessable cells")
    assert "In 0 of" not in controls


def test_near_chance_row_names_the_winners(chance_scores):
    frame = chance_cells(chance_scores, Rule("ci")).set_index("task")
    assert frame.loc["synthetic-activity", "beat_baseline"] == "P"
    assert frame.loc["synthetic-hr", "beat_baseline"] == ""
    assert frame.loc["synthetic-hr", "baseline_mean"] == pytest.approx(10.0)


def test_unknown_rule_is_a_one_line_error():
    from ppgbench_pl.errors import PPGBenchError

    with pytest.raises(PPGBenchError, match="unknown baseline rule 'strict'"):
        Rule("strict")


@pytest.fixture(scope="module")
def control_scores(tmp_path_factory):
    run = tmp_path_factory.mktemp("controls")
    ba, mae = tuple(spread(0.3, 0.01)), tuple(spread(20.0, 0.1))
    cells = {
        ("dalia-hr", mae): {"P": (3.0, 0.1), "prv_neurokit2": (5.0, 0.1), "prv_published": (6.0, 0.1),
                            "moment_small": (4.0, 0.1)},
        ("dalia-activity", ba): {"P": (0.70, 0.01), "Q": (0.65, 0.01), "prv_neurokit2": (0.60, 0.01),
                                 "moment_small": (0.71, 0.01)},
        ("wesad-4class", ba): {"P": (0.60, 0.01), "prv_neurokit2": (0.50, 0.01)},
        ("bidmc-resp", mae): {"P": (3.0, 0.1)},
        ("bidmc-spo2", mae): {"prv_neurokit2": (3.0, 0.1), "moment_small": (2.0, 0.1)},
    }
    for (task, base), models in cells.items():
        for model, (mean, half) in models.items():
            write_cell(run, model, task, "linear", spread(mean, half), base)
    return Scores(load_runs([run]).records)


def test_controls_hold_only_where_no_ppg_model_beats_every_present_control(control_scores):
    frame = control_cells(control_scores, Rule("ci")).set_index("task")
    assert frame["status"].to_dict() == {
        "dalia-hr": "beaten", "dalia-activity": "not_beaten", "wesad-4class": "beaten",
        "bidmc-resp": "no_controls", "bidmc-spo2": "no_ppg_model",
    }
    assert frame.loc["dalia-hr", "winners"] == "P"
    assert frame.loc["dalia-activity", "ppg_models"] == "P;Q"
    assert frame.loc["dalia-activity", "controls"] == "prv_neurokit2;moment_small"
    assert frame.loc["wesad-4class", "controls"] == "prv_neurokit2"  # MOMENT absent: not required there


def test_control_headline_counts_assessable_cells(control_scores):
    rule = Rule("ci")
    head = headline(chance_cells(control_scores, rule), control_cells(control_scores, rule), rule)
    assert head.controls_hold == [("dalia-activity", "linear")]
    assert head.n_assessable == 3
    assert sorted(head.not_assessable) == [("bidmc-resp", "linear"), ("bidmc-spo2", "linear")]
    assert head.controls_seen == ["prv_neurokit2", "prv_published", "moment_small"]
    assert "In 1 of 3 assessable cells" in head.lines()[1]


def test_headline_says_which_controls_were_not_run(chance_scores):
    rule = Rule("ci")
    head = headline(chance_cells(chance_scores, rule), control_cells(chance_scores, rule), rule)
    assert head.n_assessable == 0
    assert "controls run: none; not run: prv_neurokit2, prv_published, moment_small" in head.lines()[1]
