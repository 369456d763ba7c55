"""The two-level interval on the effects and compare rows (issue 31; the default subject-level interval).

The seed term comes from the fold values every row holds (``var_seed``); the subject term needs the
per-subject differences of the seeds' pooled out-of-fold predictions, read once per model and cell by
:class:`~ppgbench_pl.report.subject_interval.CellStats`. Where they cannot be built (no prediction
files, folds without ``train_groups`` when the constant baseline's MAE has to be rebuilt from the pooled
labels, or a metric that does not pool),
the row keeps the corrected t and ``interval`` says why; its ``calibration`` label is the corrected t's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.report.effects import calibration
from ppgbench_pl.report.subject_interval import POOLED, CellStats
from ppgbench_pl.results.inference import ALPHA, adjusted_mdd_at, family_level, holm
from ppgbench_pl.results.two_level import subject_scores, two_level_mdd, two_level_test

TL_COLUMNS = ["interval", "tl_ci_low", "tl_ci_high", "tl_df", "var_subject", "p_nb", "mdd_nb"]


def subject_diff(cells: CellStats, a: tuple[int, str], b: tuple[int, str] | None, task: str, regime: str,
                 metric: str) -> tuple[np.ndarray | None, str]:
    """[S, N] per-subject differences a - b (``b`` None: the constant baseline), or None and why not."""
    kind = cells.kind(a[0], a[1], task, regime)
    if (kind, metric) not in POOLED:
        return None, f"corrected-t (per-subject scores cannot pool {metric})"
    left = cells.stats(a[0], a[1], task, regime)
    right = cells.stats(a[0], a[1], task, regime, baseline=True) if b is None else cells.stats(b[0], b[1], task,
                                                                                               regime)
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


def with_two_level(table: pd.DataFrame, pair: Callable[[pd.Series], tuple[np.ndarray | None, str]],
                   group: list[str], adjust: Callable[[Any], Any] = holm, alpha: float = ALPHA) -> pd.DataFrame:
    """``table`` with the two-level p, interval and MDD where built; ``p_adj`` and ``mdd_adj`` recomputed."""
    out = table.copy()
    extra = []
    for _, row in out.iterrows():
        sub, used = pair(row)
        rec: dict[str, Any] = {"interval": used, "tl_ci_low": math.nan, "tl_ci_high": math.nan, "tl_df": math.nan,
                               "var_subject": math.nan, "p_nb": row["p"], "mdd_nb": row["mdd"], "p": row["p"],
                               "mdd": row["mdd"]}
        if sub is not None:
            test = two_level_test(float(row["diff"]), float(row["var_seed"]), sub, alpha)
            rec.update(tl_ci_low=test.ci_low, tl_ci_high=test.ci_high, tl_df=test.df, var_subject=test.var_subject,
                       p=test.p, mdd=two_level_mdd(test.var_subject, test.var_seed, test.df, alpha))
        extra.append(rec)
    new = pd.DataFrame(extra, index=out.index)
    for col in new.columns:
        out[col] = new[col]
    out["calibration"] = [calibration("two_level" if u == "two-level" else "corrected_t") for u in out["interval"]]
    out["p_adj"] = math.nan
    parts = [idx for _, idx in out.groupby(group, sort=False).groups.items()] if group else [out.index]
    for idx in parts:
        out.loc[idx, "p_adj"] = adjust(out.loc[idx, "p"].to_numpy(dtype=float))
        level = family_level(alpha, int(out.loc[idx, "p"].notna().sum()))
        out.loc[idx, "mdd_adj"] = [adjusted_mdd_at(m, int(j), level, alpha) if u != "two-level" else
                                   two_level_mdd(vs, v, d, level) for m, j, u, vs, v, d in
                                   zip(out.loc[idx, "mdd"], out.loc[idx, "n_units"], out.loc[idx, "interval"],
                                       out.loc[idx, "var_subject"], out.loc[idx, "var_seed"], out.loc[idx, "tl_df"],
                                       strict=True)]
    return out


def two_level_effects(table: pd.DataFrame, runs: Any, alpha: float = ALPHA) -> pd.DataFrame:
    """The report's effects with the two-level interval where it can be built; ``p_holm`` and verdicts redone."""
    from ppgbench_pl.report.effects import verdict

    if table.empty:
        return table.assign(**{c: pd.Series(dtype=object) for c in TL_COLUMNS})
    cells = CellStats([runs])

    def pair(row: pd.Series) -> tuple[np.ndarray | None, str]:
        b = None if row["model_b"] == "constant" else (0, str(row["model_b"]))
        return subject_diff(cells, (0, str(row["model_a"])), b, str(row["task"]), str(row["regime"]),
                            str(row["metric"]))

    out = with_two_level(table, pair, ["regime", "task", "family"], holm, alpha)
    out["p_holm"] = out.pop("p_adj")
    out["verdict"] = [verdict(r, alpha) for r in out.to_dict("records")]
    return out
