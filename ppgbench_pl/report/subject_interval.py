"""``--subject-interval bootstrap``: the subject cluster bootstrap as the subject-level interval (issue 19).

The default subject-level interval of the paired effects is the Nadeau-Bengio corrected t
(:mod:`ppgbench_pl.report.effects`). This switch, of ``ppgbench report`` and ``ppgbench compare``,
replaces it by the paired subject cluster bootstrap of the pooled out-of-fold predictions
(:func:`ppgbench_pl.report.bootstrap.cluster_bootstrap`: subjects resampled, the same draw in every seed,
the metric per seed, averaged over seeds). The table gains ``boot_ci_low``/``boot_ci_high``, ``p_boot``,
``boot_subjects``, ``p_nb`` (the corrected-t p) and ``interval``, and ``p`` becomes the bootstrap p, so the
Holm and Benjamini-Hochberg adjustments and every verdict follow it.

The bootstrap needs the stored predictions of both sides and a metric it can pool (MAE, balanced
accuracy). Where it cannot be built, the row keeps the corrected t and ``interval`` says why: the
constant baseline stores no predictions, so under MAE it is unknown on a draw; a missing or unreadable
prediction file; another metric (``argmax_balanced_accuracy``). The MDD stays the corrected t's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.report.effects import calibration
from ppgbench_pl.report.load import ReportError, RunSet
from ppgbench_pl.results.inference import ALPHA, holm

INTERVALS = ("two-level", "corrected-t", "bootstrap")
#: Bootstrap draws and the seed of their generator (the same numbers on every machine).
N_BOOT, BOOT_SEED = 2000, 0
POOLED = {("regression", "mae"), ("classification", "balanced_accuracy")}
BOOT_COLUMNS = ["interval", "boot_ci_low", "boot_ci_high", "p_boot", "p_nb", "boot_subjects"]

Stats = dict[int, tuple[np.ndarray, np.ndarray]]


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
        from ppgbench_pl.report.bootstrap_runs import seed_stats

        key = (run, model, task, regime, baseline)
        if key not in self.cache:
            recs = self.records.get((run, model, task, regime), [])
            self.cache[key] = seed_stats(self.runs[run], recs, self.kind(run, model, task, regime),
                                         baseline=baseline) if recs else {}
        return self.cache[key]


def bootstrap_pair(cells: CellStats, a: tuple[int, str], b: tuple[int, str] | None, task: str, regime: str,
                   metric: str, alpha: float) -> tuple[dict[str, float], str]:
    """The bootstrap of ``a`` - ``b`` ((run, model) each; ``b`` None: the constant baseline) and the interval used."""
    from ppgbench_pl.report.bootstrap import cluster_bootstrap

    kind = cells.kind(a[0], a[1], task, regime)
    if (kind, metric) not in POOLED:
        return {}, f"corrected-t (the bootstrap cannot pool {metric})"
    if b is None and kind == "regression":
        return {}, "corrected-t (no predictions of the constant baseline under MAE)"
    left = cells.stats(a[0], a[1], task, regime)
    right = cells.stats(a[0], a[1], task, regime, baseline=True) if b is None else cells.stats(b[0], b[1], task,
                                                                                               regime)
    result = cluster_bootstrap(left, right, kind, N_BOOT, BOOT_SEED, alpha)
    if not math.isfinite(result["p"]):
        return {}, "corrected-t (prediction files missing or no shared subjects)"
    return result, "bootstrap"


def with_bootstrap(table: pd.DataFrame, pair: Callable[[pd.Series], tuple[dict[str, float], str]],
                   group: list[str], adjust: Callable[[Any], Any] = holm) -> pd.DataFrame:
    """``table`` with the bootstrap columns, ``p`` from the bootstrap where built and ``p_adj`` recomputed.

    Args:
        table: Effects (or compare) rows with ``p``.
        pair: Row -> (bootstrap result, interval used).
        group: Columns whose groups are one adjustment family (``[]``: the whole table).
        adjust: The adjustment (Holm for the report's families, Benjamini-Hochberg for compare).

    """
    out = table.copy()
    extra = []
    for _, row in out.iterrows():
        result, used = pair(row)
        extra.append({"interval": used, "boot_ci_low": result.get("ci_low", math.nan),
                      "boot_ci_high": result.get("ci_high", math.nan), "p_boot": result.get("p", math.nan),
                      "p_nb": row["p"], "boot_subjects": result.get("n_subjects", math.nan)})
    boot = pd.DataFrame(extra, index=out.index, columns=BOOT_COLUMNS)
    out = pd.concat([out, boot], axis=1)
    out["p"] = np.where(out["interval"] == "bootstrap", out["p_boot"], out["p_nb"])
    if "calibration" in out:
        out["calibration"] = [calibration("bootstrap" if used == "bootstrap" else "corrected_t")
                              for used in out["interval"]]
    out["p_adj"] = math.nan
    parts = [idx for _, idx in out.groupby(group, sort=False).groups.items()] if group else [out.index]
    for idx in parts:
        out.loc[idx, "p_adj"] = adjust(out.loc[idx, "p"].to_numpy(dtype=float))
    return out


def bootstrap_effects(table: pd.DataFrame, runs: RunSet, alpha: float = ALPHA) -> pd.DataFrame:
    """The report's effects with the bootstrap interval (module docstring); ``p_holm`` and ``verdict`` redone."""
    from ppgbench_pl.report.effects import verdict

    if table.empty:
        return table.assign(**{c: pd.Series(dtype=object) for c in BOOT_COLUMNS})
    cells = CellStats([runs])

    def pair(row: pd.Series) -> tuple[dict[str, float], str]:
        b = None if row["model_b"] == "constant" else (0, str(row["model_b"]))
        return bootstrap_pair(cells, (0, str(row["model_a"])), b, str(row["task"]), str(row["regime"]),
                              str(row["metric"]), alpha)

    out = with_bootstrap(table, pair, ["regime", "task", "family"])
    out["p_holm"] = out.pop("p_adj")
    out["verdict"] = [verdict(r, alpha) for r in out.to_dict("records")]
    return out
