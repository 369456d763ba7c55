"""The subject-level interval of the effects and compare rows: two-level (default) or subject cluster bootstrap.

Both read the seeds' pooled out-of-fold predictions once per model and cell (:class:`CellStats`). Where they
cannot be built (no prediction files, a metric that does not pool, the constant's MAE without
``train_groups``) a row keeps the corrected t and ``interval`` says why (issues 19, 31).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.report.bootstrap import cluster_bootstrap, seed_stats
from ppgbench_pl.report.effects import calibration
from ppgbench_pl.report.load import ReportError, RunSet
from ppgbench_pl.results.inference import ALPHA, adjusted_mdd_at, family_level, holm
from ppgbench_pl.results.two_level import subject_scores, two_level_mdd, two_level_test

INTERVALS = ("two-level", "corrected-t", "bootstrap")
#: Bootstrap draws and the seed of their generator (the same numbers on every machine).
N_BOOT, BOOT_SEED = 2000, 0
POOLED = {("regression", "mae"), ("classification", "balanced_accuracy")}
TL_COLUMNS = ["interval", "tl_ci_low", "tl_ci_high", "tl_df", "var_subject", "p_nb", "mdd_nb"]
BOOT_COLUMNS = ["interval", "boot_ci_low", "boot_ci_high", "p_boot", "p_nb", "boot_subjects"]
#: The effects' adjustment family: the comparisons of one kind in one cell.
FAMILY = ["regime", "task", "family"]

Stats = dict[int, tuple[np.ndarray, np.ndarray]]
Side = tuple[int, str]  # (run index, model)


def check_interval(interval: str) -> str:
    """The interval's name, or one line naming the choices."""
    if interval not in INTERVALS:
        raise ReportError(f"--subject-interval {interval}: choose two-level (default), corrected-t or bootstrap")
    return interval


class CellStats:
    """Per-subject statistics of each (run, model, task, regime), read once from the stored predictions."""

    def __init__(self, sources: Iterable[RunSet]) -> None:
        self.records: dict[tuple[int, str, str, str], list[dict[str, Any]]] = {}
        self.runs = list(sources)
        for i, runs in enumerate(self.runs):
            for rec in runs.records:
                self.records.setdefault((i, rec["model"], rec["task"], rec["regime"]), []).append(rec)
        self.cache: dict[tuple[Any, ...], Stats] = {}

    def kind(self, run: int, model: str, task: str, regime: str) -> str:
        """The cell's task kind ('' when it has no record)."""
        recs = self.records.get((run, model, task, regime)) or [{}]
        return str(recs[0].get("kind") or "")

    def stats(self, run: int, model: str, task: str, regime: str, baseline: bool = False) -> Stats:
        """Seed -> (subjects, statistics) of a model's pooled predictions (the constant's with ``baseline``)."""
        key = (run, model, task, regime, baseline)
        if key not in self.cache:
            recs = self.records.get((run, model, task, regime), [])
            self.cache[key] = seed_stats(self.runs[run], recs, self.kind(run, model, task, regime),
                                         baseline=baseline) if recs else {}
        return self.cache[key]

    def sides(self, a: Side, b: Side | None, task: str, regime: str) -> tuple[Stats, Stats]:
        """The statistics of ``a`` and of ``b`` (None: ``a``'s constant baseline)."""
        right = self.stats(*a, task, regime, baseline=True) if b is None else self.stats(*b, task, regime)
        return self.stats(*a, task, regime), right


def subject_diff(cells: CellStats, a: Side, b: Side | None, task: str, regime: str,
                 metric: str) -> tuple[np.ndarray | None, str]:
    """[S, N] per-subject differences a - b (``b`` None: the constant baseline), or None and why not."""
    kind = cells.kind(*a, task, regime)
    if (kind, metric) not in POOLED:
        return None, f"corrected-t (per-subject scores cannot pool {metric})"
    left, right = cells.sides(a, b, task, regime)
    seeds = sorted(set(left) & set(right))
    common = set.intersection(*[set(left[s][0]) & set(right[s][0]) for s in seeds]) if seeds else set()
    if len(seeds) < 2 or len(common) < 2:
        return None, "corrected-t (prediction files missing, fewer than 2 seeds or no shared subjects)"
    names = np.array(sorted(common))
    rows = []
    for s in seeds:
        diff = []
        for side in (left, right):
            subj, stats = side[s]
            diff.append(subject_scores(stats, kind)[np.searchsorted(subj, names)])
        rows.append(diff[0] - diff[1])
    return np.vstack(rows), "two-level"


def bootstrap_pair(cells: CellStats, a: Side, b: Side | None, task: str, regime: str, metric: str,
                   alpha: float) -> tuple[dict[str, float], str]:
    """The subject cluster bootstrap of ``a`` - ``b`` (``b`` None: the constant baseline) and the interval used."""
    kind = cells.kind(*a, task, regime)
    if (kind, metric) not in POOLED:
        return {}, f"corrected-t (the bootstrap cannot pool {metric})"
    if b is None and kind == "regression":
        return {}, "corrected-t (no predictions of the constant baseline under MAE)"
    result = cluster_bootstrap(*cells.sides(a, b, task, regime), kind, N_BOOT, BOOT_SEED, alpha)
    if not math.isfinite(result["p"]):
        return {}, "corrected-t (prediction files missing or no shared subjects)"
    return result, "bootstrap"


def _families(out: pd.DataFrame, group: list[str]) -> list[Any]:
    """The row indices of each adjustment family (``group`` empty: the whole table)."""
    return [idx for _, idx in out.groupby(group, sort=False).groups.items()] if group else [out.index]


def _two_level_row(row: pd.Series, sub: np.ndarray | None, used: str, alpha: float) -> dict[str, Any]:
    rec: dict[str, Any] = {"interval": used, "tl_ci_low": math.nan, "tl_ci_high": math.nan, "tl_df": math.nan,
                           "var_subject": math.nan, "p_nb": row["p"], "mdd_nb": row["mdd"], "p": row["p"],
                           "mdd": row["mdd"]}
    if sub is not None:
        test = two_level_test(float(row["diff"]), float(row["var_seed"]), sub, alpha)
        rec.update(tl_ci_low=test.ci_low, tl_ci_high=test.ci_high, tl_df=test.df, var_subject=test.var_subject,
                   p=test.p, mdd=two_level_mdd(test.var_subject, test.var_seed, test.df, alpha))
    return rec


def _boot_row(row: pd.Series, result: dict[str, float], used: str) -> dict[str, Any]:
    return {"interval": used, "boot_ci_low": result.get("ci_low", math.nan),
            "boot_ci_high": result.get("ci_high", math.nan), "p_boot": result.get("p", math.nan), "p_nb": row["p"],
            "boot_subjects": result.get("n_subjects", math.nan)}


def subject_level(table: pd.DataFrame, cells: CellStats, interval: str, group: list[str],
                  adjust: Callable[[Any], Any], alpha: float) -> pd.DataFrame:
    """``table`` with the two-level or bootstrap interval where built; ``p_adj`` (and ``mdd_adj``) per family.

    ``model_a`` is of the first run of ``cells``, ``model_b`` of the last (``constant``: model_a's own baseline).
    """
    run_b = len(cells.runs) - 1

    def sides(row: pd.Series) -> tuple[Side, Side | None, str, str, str]:
        b = None if run_b == 0 and row["model_b"] == "constant" else (run_b, str(row["model_b"]))
        return (0, str(row["model_a"])), b, str(row["task"]), str(row["regime"]), str(row["metric"])

    out = table.copy()
    if interval == "two-level":
        new = pd.DataFrame([_two_level_row(row, *subject_diff(cells, *sides(row)), alpha)
                            for _, row in out.iterrows()], index=out.index)
        for col in new.columns:
            out[col] = new[col]
    else:
        boot = pd.DataFrame([_boot_row(row, *bootstrap_pair(cells, *sides(row), alpha)) for _, row in out.iterrows()],
                            index=out.index, columns=BOOT_COLUMNS)
        out = pd.concat([out, boot], axis=1)
        out["p"] = np.where(out["interval"] == "bootstrap", out["p_boot"], out["p_nb"])
    method = {"two-level": "two_level", "bootstrap": "bootstrap"}
    out["calibration"] = [calibration(method.get(u, "corrected_t")) for u in out["interval"]]
    out["p_adj"] = math.nan
    for idx in _families(out, group):
        out.loc[idx, "p_adj"] = adjust(out.loc[idx, "p"].to_numpy(dtype=float))
        if interval != "two-level":
            continue
        level = family_level(alpha, int(out.loc[idx, "p"].notna().sum()))
        out.loc[idx, "mdd_adj"] = [adjusted_mdd_at(m, int(j), level, alpha) if u != "two-level" else
                                   two_level_mdd(vs, v, d, level) for m, j, u, vs, v, d in
                                   zip(out.loc[idx, "mdd"], out.loc[idx, "n_units"], out.loc[idx, "interval"],
                                       out.loc[idx, "var_subject"], out.loc[idx, "var_seed"], out.loc[idx, "tl_df"],
                                       strict=True)]
    return out


def subject_effects(table: pd.DataFrame, runs: RunSet, interval: str, alpha: float = ALPHA) -> pd.DataFrame:
    """The report's effects with the subject-level ``interval`` where built; ``p_holm`` and verdicts redone."""
    from ppgbench_pl.report.effects import verdict

    if table.empty:
        columns = BOOT_COLUMNS if interval == "bootstrap" else TL_COLUMNS
        return table.assign(**{c: pd.Series(dtype=object) for c in columns})
    out = subject_level(table, CellStats([runs]), interval, FAMILY, holm, alpha)
    out["p_holm"] = out.pop("p_adj")
    out["verdict"] = [verdict(r, alpha) for r in out.to_dict("records")]
    return out
