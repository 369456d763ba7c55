import math

import numpy as np
import pytest
from scipy import stats

from ppgbench_pl.report.compare import Scores, default_pairs, nemenyi_cd, paired_comparisons, paired_test, rank_models
from ppgbench_pl.report.load import load_runs
from ppgbench_pl.report.sections import cliques
from tests.report.fabricate import SEEDS, spread, write_cell


def test_paired_test_matches_textbook_values():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    b = np.array([1.5, 2.1, 3.4, 4.2, 5.9])
    out = paired_test(a, b)
    diff = a - b
    assert out["mean_diff"] == pytest.approx(-0.42)
    assert out["ci95_diff"] == pytest.approx(stats.t.ppf(0.975, 4) * diff.std(ddof=1) / math.sqrt(5))
    assert out["t_pvalue"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert out["wilcoxon_pvalue"] == pytest.approx(0.0625)  # 5 pairs, all one sign: the smallest possible
    same = paired_test(a, a)
    assert same["mean_diff"] == 0 and math.isnan(same["t_pvalue"]) and math.isnan(same["wilcoxon_pvalue"])


def test_default_pairs_compare_tested_models_with_controls():
    assert default_pairs(["P", "Q", "prv_neurokit2", "constant"]) == [("P", "prv_neurokit2"), ("P", "constant"), ("Q", "prv_neurokit2"),
                                                            ("Q", "constant")]
    assert default_pairs(["prv_neurokit2", "moment_small", "constant"]) == [
        ("prv_neurokit2", "moment_small"), ("prv_neurokit2", "constant"), ("moment_small", "constant")]


def test_paired_comparisons_pair_same_seeds_and_folds(tmp_path):
    base = spread(10.0, 0.5)
    for fold in (0, 1):
        p_values = [b - 1.0 - 0.1 * fold for b in base]
        prv_values = [b - 0.5 for b in base][:4]
        write_cell(tmp_path, "P", "synthetic-hr", "linear", p_values, base, fold=fold)
        write_cell(tmp_path, "prv_neurokit2", "synthetic-hr", "linear", prv_values, base[:4], SEEDS[:4], fold=fold)
    scores = Scores(load_runs([tmp_path]).records)
    frame = paired_comparisons(scores).set_index(["model_a", "model_b"])
    vs_prv = frame.loc[("P", "prv_neurokit2")]
    assert vs_prv["n_pairs"] == 4  # seed 5 has no prv_neurokit2 job
    assert vs_prv["mean_diff"] == pytest.approx(-0.55) and vs_prv["better"] == "P"  # lower MAE is better
    vs_const = frame.loc[("P", "constant")]
    assert vs_const["n_pairs"] == 5 and vs_const["mean_diff"] == pytest.approx(-1.05)
    by_fold = paired_comparisons(Scores(load_runs([tmp_path]).records, ci_unit="fold"), [("P", "prv_neurokit2")])
    assert by_fold["n_pairs"].tolist() == [8] and by_fold["unit"].tolist() == ["fold"]


def test_nemenyi_cd_uses_the_studentized_range():
    assert nemenyi_cd(2, 1) == pytest.approx(1.960 * math.sqrt(1.0), rel=1e-3)
    assert nemenyi_cd(4, 3) == pytest.approx(2.569 * math.sqrt(20 / 18), rel=1e-3)  # Demsar (2006) table 5


def test_ranking_across_tasks(tmp_path):
    base_ba, base_mae = spread(0.3, 0.01), spread(20.0, 0.1)
    orders = {"synthetic-activity": (["A", "B", "C", "D"], base_ba),
              "synthetic-stiffness": (["A", "B", "C", "D"], base_ba),
              "synthetic-hr": (["B", "A", "C", "D"], base_mae)}
    for task, (order, base) in orders.items():
        higher = task != "synthetic-hr"
        for position, model in enumerate(order):
            value = (0.9 - 0.1 * position) if higher else (2.0 + position)
            write_cell(tmp_path, model, task, "linear", spread(value, 0.01), base)
    write_cell(tmp_path, "E", "synthetic-hr", "linear", spread(1.0, 0.01), base_mae)  # one task only
    ranking = rank_models(Scores(load_runs([tmp_path]).records), "linear")
    assert ranking.dropped_models == ["E"]
    assert ranking.n_tasks == 3
    # the constant baseline is worst everywhere (rank 5)
    assert ranking.average_ranks.round(4).to_dict() == {"A": 1.3333, "B": 1.6667, "C": 3.0, "D": 4.0,
                                                        "constant": 5.0}
    ranks = np.array([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [2, 1, 3, 4, 5]], float)
    assert ranking.friedman_pvalue == pytest.approx(stats.friedmanchisquare(*ranks.T).pvalue)
    assert ranking.critical_difference == pytest.approx(nemenyi_cd(5, 3))


def test_cliques_join_models_within_the_cd():
    assert cliques([1.0, 1.5, 2.6, 3.0], 1.0) == [(0, 1), (2, 3)]
    assert cliques([1.0, 2.0, 3.0], 5.0) == [(0, 2)]
    assert cliques([1.0, 3.0], 0.5) == []
