"""Paired model comparisons, the critical-difference ranking (Demšar 2006) and the "meaningfully better" rules.

Wilcoxon is shown, never a verdict (with 5 seeds its p cannot go below 0.0625); docs/report.md has the rules.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report.load import ReportError, is_control, order_models, order_regimes, order_tasks
from ppgbench_pl.results.fold_entry import student_t_ci
from ppgbench_pl.results.summary import SummaryBook


@dataclass(frozen=True)
class Score:
    """One model's result in one cell: mean and Student-t 95% CI half-width (NaN with one unit)."""

    model: str
    mean: float
    ci95: float
    n_seeds: int
    n_folds: int

    @property
    def half_width(self) -> float:
        """The CI half-width, with an unknown CI counted as zero (bolding needs a number)."""
        return 0.0 if math.isnan(self.ci95) else self.ci95


class Scores:
    """Fold values and summary rows of completed records, indexed for the report (CI over ``ci_unit``)."""

    def __init__(self, records: Iterable[dict[str, Any]], ci_unit: str = "seed") -> None:
        records = [r for r in records if r.get("status") == "ok"]
        self.ci_unit = ci_unit
        book = SummaryBook.from_records(records, ci_unit)
        self.summary: pd.DataFrame = book.summary()
        self.folds: pd.DataFrame = book.fold_table()
        self.higher_is_better: dict[str, bool] = {r["task"]: r["kind"] != "regression" for r in records}
        self.metric: dict[str, str] = {r["task"]: r["metric"] for r in records}
        self._index = {(row.task, row.regime, row.model): Score(row.model, float(row.mean), float(row.ci95),
                                                                int(row.n_seeds), int(row.n_folds))
                       for row in self.summary.itertuples()}
        self._baseline = {(row.task, row.regime, row.model): str(row.baseline)
                          for row in self.summary.itertuples()
                          if isinstance(row.baseline, str) and row.baseline and ";" not in row.baseline}
        self._folds_by_cell = {key: part for key, part in self.folds.groupby(["task", "regime"], sort=False)}

    @property
    def regimes(self) -> list[str]:
        """Regimes with at least one score, in protocol order."""
        return order_regimes(set(self.summary["regime"]))

    @property
    def models(self) -> list[str]:
        """Models with at least one score (the constant baseline included), controls last."""
        return order_models(set(self.summary["model"]))

    def tasks(self, regime: str | None = None) -> list[str]:
        """Tasks with a score (in ``regime`` if given), in registry order."""
        frame = self.summary if regime is None else self.summary[self.summary["regime"] == regime]
        return order_tasks(set(frame["task"]))

    def cells(self) -> list[tuple[str, str]]:
        """(regime, task) of every cell with a score, in protocol order: the loop of every per-cell table."""
        return [(regime, task) for regime in self.regimes for task in self.tasks(regime)]

    def baselines(self, task: str, regime: str) -> list[str]:
        """List the baseline rows of a cell (one per task view), in column order."""
        return [s.model for s in self.cell(task, regime) if is_baseline(s.model)]

    def baseline_of(self, task: str, regime: str, model: str) -> str | None:
        """The baseline row a (non-baseline) model is compared with in a cell: its task view's."""
        return self._baseline.get((task, regime, model))

    def resolve(self, task: str, regime: str, model: str, other: str) -> str | None:
        """``other``, or ``model``'s own baseline when ``other`` is the placeholder ``constant``."""
        if other == BASELINE_MODEL and not is_baseline(model):
            return self.baseline_of(task, regime, model)
        return other

    def runs(self, task: str, regime: str, model: str) -> pd.DataFrame:
        """Return the fold rows behind one score (seed, fold, value, view, backend, code_version)."""
        part = self._folds_by_cell.get((task, regime), self.folds.iloc[:0])
        return part[part["model"] == model]

    def get(self, task: str, regime: str, model: str) -> Score | None:
        """Return a model's score in a cell, or None when that cell was not run (or not finished)."""
        return self._index.get((task, regime, model))

    def cell(self, task: str, regime: str) -> list[Score]:
        """Every model's score in a cell, in column order."""
        return [s for m in self.models if (s := self.get(task, regime, m)) is not None]

    def best(self, task: str, regime: str) -> Score | None:
        """Return the best mean in a cell (lowest MAE, highest BA); first in column order on ties."""
        sign = 1.0 if self.higher_is_better.get(task) else -1.0
        return max(self.cell(task, regime), key=lambda s: sign * s.mean, default=None)

    def paired_values(self, task: str, regime: str, model_a: str, model_b: str) -> tuple[np.ndarray, np.ndarray]:
        """Values of two models on the same (seed, fold) pairs, averaged per seed when the CI unit is ``seed``."""
        a, b = (self.runs(task, regime, m).set_index(["seed", "fold"])["value"] for m in (model_a, model_b))
        joined = pd.concat({"a": a, "b": b}, axis=1, join="inner")
        if self.ci_unit == "seed" and len(joined):
            joined = joined.groupby(level="seed").mean()
        return joined["a"].to_numpy(dtype=float), joined["b"].to_numpy(dtype=float)


PAIRED_COLUMNS = ["regime", "task", "metric", "model_a", "model_b", "n_pairs", "unit", "mean_a", "mean_b", "mean_diff",
                  "ci95_diff", "t_stat", "t_pvalue", "wilcoxon_stat", "wilcoxon_pvalue", "better"]


def paired_test(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Mean difference a - b with t CI, paired t-test and Wilcoxon signed-rank; NaN where undefined."""
    diff = np.asarray(a, float) - np.asarray(b, float)
    out = {"n_pairs": float(len(diff)), "mean_diff": float(diff.mean()) if len(diff) else math.nan,
           "ci95_diff": student_t_ci(diff), "t_stat": math.nan, "t_pvalue": math.nan,
           "wilcoxon_stat": math.nan, "wilcoxon_pvalue": math.nan}
    if len(diff) < 2:
        return out
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if np.any(diff != 0):  # both tests are undefined when every difference is zero
            t = stats.ttest_rel(a, b)
            out["t_stat"], out["t_pvalue"] = float(t.statistic), float(t.pvalue)
            w = stats.wilcoxon(diff)
            out["wilcoxon_stat"], out["wilcoxon_pvalue"] = float(w.statistic), float(w.pvalue)
    return out


def default_pairs(models: Sequence[str]) -> list[tuple[str, str]]:
    """Each non-control model against each control present (the constant once); else the controls pairwise."""
    tested = [m for m in models if not is_control(m)]
    controls = [m for m in models if is_control(m) and not is_baseline(m)]
    if any(is_baseline(m) for m in models):
        controls.append(BASELINE_MODEL)
    if tested:
        return [(m, c) for m in tested for c in controls]
    return [(a, b) for i, a in enumerate(controls) for b in controls[i + 1:]]


def paired_comparisons(scores: Scores, pairs: Sequence[tuple[str, str]] | None = None) -> pd.DataFrame:
    """One row per (regime, task, pair) with matched units; ``better`` is ``undetermined`` without a p-value."""
    pairs = list(pairs) if pairs is not None else default_pairs(scores.models)
    rows = []
    for (regime, task), pair in itertools.product(scores.cells(), pairs):
        model_a = scores.resolve(task, regime, pair[1], pair[0])
        model_b = scores.resolve(task, regime, pair[0], pair[1])
        if model_a is None or model_b is None:
            continue
        a, b = scores.paired_values(task, regime, model_a, model_b)
        if not len(a):
            continue
        test = paired_test(a, b)
        diff = test["mean_diff"] * (1.0 if scores.higher_is_better[task] else -1.0)
        better = "tie" if diff == 0 else (model_a if diff > 0 else model_b)
        if math.isnan(test["t_pvalue"]):  # no p-value (one unit, or fewer than 2 seeds): no winner
            better = "undetermined"
        rows.append({"regime": regime, "task": task, "metric": scores.metric[task], "model_a": model_a,
                     "model_b": model_b, "unit": scores.ci_unit, "mean_a": float(a.mean()), "mean_b": float(b.mean()),
                     **test, "n_pairs": len(a), "better": better})
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


@dataclass
class Ranking:
    """Average ranks of the models in one regime, with the Friedman test and the Nemenyi CD."""

    regime: str
    average_ranks: pd.Series
    n_tasks: int
    tasks: list[str]
    friedman_stat: float
    friedman_pvalue: float
    critical_difference: float
    dropped_models: list[str] = field(default_factory=list)


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference for k models over n tasks (studentized range with infinite df)."""
    from scipy import stats

    q = stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return float(q * math.sqrt(k * (k + 1) / (6.0 * n)))


def rank_models(scores: Scores, regime: str, alpha: float = 0.05) -> Ranking | None:
    """Average ranks, Friedman test and CD in one regime (several constants left out); None below 2 x 2."""
    from scipy import stats

    frame = scores.summary[scores.summary["regime"] == regime]
    baselines = sorted({m for m in frame["model"] if is_baseline(m)})
    if len(baselines) > 1:  # one baseline per task view: none of them is a model to rank
        frame = frame[~frame["model"].isin(baselines)]
    means = frame.pivot_table(index="task", columns="model", values="mean", aggfunc="first")
    means = means.reindex(columns=[m for m in scores.models if m in means.columns])
    dropped: list[str] = []  # the least-covered models, dropped until >= 2 tasks have a score of every model
    while means.shape[1] >= 2 and len(means.dropna()) < 2:
        dropped.append(str(means.isna().sum().iloc[::-1].idxmax()))  # most missing; the last column on ties
        means = means.drop(columns=dropped[-1])
    block = means.dropna()
    if block.shape[1] < 2 or len(block) < 2:
        return None
    signs = np.array([1.0 if scores.higher_is_better[t] else -1.0 for t in block.index])
    ranks = np.vstack([stats.rankdata(-s * row) for s, row in zip(signs, block.to_numpy(), strict=True)])
    k, n = block.shape[1], block.shape[0]
    stat, pvalue = math.nan, math.nan
    if k >= 3:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.friedmanchisquare(*ranks.T)
        stat, pvalue = float(result.statistic), float(result.pvalue)
    average = pd.Series(ranks.mean(axis=0), index=block.columns).sort_values()
    return Ranking(regime, average, n, list(block.index), stat, pvalue, nemenyi_cd(k, n, alpha), dropped)


def ranking_table(rankings: Sequence[Ranking]) -> pd.DataFrame:
    """Long table: regime, model, average rank, tasks, Friedman statistic and p, CD."""
    rows = [{"regime": r.regime, "model": model, "average_rank": float(rank), "n_tasks": r.n_tasks,
             "friedman_stat": r.friedman_stat, "friedman_pvalue": r.friedman_pvalue,
             "critical_difference": r.critical_difference} for r in rankings for model, rank in r.average_ranks.items()]
    return pd.DataFrame(rows, columns=["regime", "model", "average_rank", "n_tasks", "friedman_stat", "friedman_pvalue",
                                       "critical_difference"])


RULES = ("ci", "paired", "mean")
RULE_TEXT = {
    "ci": "better mean and 95% CIs that do not overlap (|m1 - m2| > c1 + c2), CIs from the same regime's jobs",
    "paired": "better mean and a two-sided paired t-test p < {alpha:g} over the same seeds and folds",
    "mean": "better mean (no uncertainty taken into account)",
}


def overlaps(a: Score, b: Score) -> bool:
    """Whether two intervals m ± c overlap: ``|m1 - m2| <= c1 + c2`` (unknown CI counted as zero)."""
    return abs(a.mean - b.mean) <= a.half_width + b.half_width


@dataclass(frozen=True)
class Rule:
    """When one model meaningfully beats another in a cell (``name`` one of :data:`RULES`)."""

    name: str = "ci"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.name not in RULES:
            raise ReportError(f"unknown baseline rule '{self.name}'; choose from {', '.join(RULES)}")

    @property
    def text(self) -> str:
        """The rule in words, for tables and the HTML page."""
        return RULE_TEXT[self.name].format(alpha=self.alpha)

    def beats(self, scores: Scores, task: str, regime: str, model: str, other: str) -> bool | None:
        """Whether ``model`` meaningfully beats ``other`` (``constant``: its own baseline); None: undecidable."""
        rival = scores.resolve(task, regime, model, other)
        a, b = scores.get(task, regime, model), None if rival is None else scores.get(task, regime, rival)
        if a is None or b is None or rival is None:
            return None
        if not (a.mean > b.mean if scores.higher_is_better[task] else a.mean < b.mean):  # strictly better mean
            return False
        if self.name == "mean":
            return True
        if self.name == "ci":  # an unknown CI decides nothing
            return None if math.isnan(a.ci95) or math.isnan(b.ci95) else not overlaps(a, b)
        va, vb = scores.paired_values(task, regime, model, rival)
        if len(va) < 2:
            return None
        p = paired_test(va, vb)["t_pvalue"]
        return None if math.isnan(p) else p < self.alpha


def bold_models(scores: Scores, task: str, regime: str) -> set[str]:
    """Return the best model of a cell and every model whose CI overlaps the best's."""
    if (best := scores.best(task, regime)) is None:
        return set()
    return {s.model for s in scores.cell(task, regime) if overlaps(s, best)}
