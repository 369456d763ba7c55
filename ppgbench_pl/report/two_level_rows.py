"""The subject-level interval of the effects and compare rows: two-level (default) or subject cluster bootstrap.

Both read the seeds' pooled out-of-fold predictions once per model and cell; where they cannot be built a row
keeps the corrected t and ``interval`` says why (issues 19, 31; docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.metrics.aggregation import aggregate, first_per_group
from ppgbench_pl.report.effects import calibration, verdict
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
    rows = [subject_scores(left[s][1], kind)[np.searchsorted(left[s][0], names)]
            - subject_scores(right[s][1], kind)[np.searchsorted(right[s][0], names)] for s in seeds]
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


def row_mdd_at(row: Mapping[str, Any], level: float, alpha: float = ALPHA) -> float:
    """An effects or compare row's MDD at the per-test ``level``, by the test that gave its p (two-level or not)."""
    if row.get("interval") == "two-level":
        return two_level_mdd(float(row["var_subject"]), float(row["var_seed"]), float(row["tl_df"]), level)
    return adjusted_mdd_at(float(row["mdd"]), int(row["n_units"]), level, alpha)


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
    """``table`` with the subject-level interval where built; ``p_adj`` (and ``mdd_adj``) per family of ``group``.

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
    for idx in [i for _, i in out.groupby(group, sort=False).groups.items()] if group else [out.index]:
        out.loc[idx, "p_adj"] = adjust(out.loc[idx, "p"].to_numpy(dtype=float))
        if interval != "two-level":
            continue
        level = family_level(alpha, int(out.loc[idx, "p"].notna().sum()))
        out.loc[idx, "mdd_adj"] = [row_mdd_at(r, level, alpha) for r in out.loc[idx].to_dict("records")]
    return out


def subject_effects(table: pd.DataFrame, runs: RunSet, interval: str, alpha: float = ALPHA) -> pd.DataFrame:
    """The report's effects with the subject-level ``interval`` where built; ``p_holm`` and verdicts redone."""
    if table.empty:
        columns = BOOT_COLUMNS if interval == "bootstrap" else TL_COLUMNS
        return table.assign(**{c: pd.Series(dtype=object) for c in columns})
    out = subject_level(table, CellStats([runs]), interval, FAMILY, holm, alpha)
    out["p_holm"] = out.pop("p_adj")
    out["verdict"] = [verdict(r, alpha) for r in out.to_dict("records")]
    return out


SeedStats = Mapping[int, tuple[np.ndarray, np.ndarray]]  # seed -> (subject names, [N, k] statistics)


def subject_stats(kind: str, y_true: np.ndarray, y_pred: np.ndarray, subjects: np.ndarray,
                  classes: Sequence[Any] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Per-subject sufficient statistics (names sorted): sum |error| and windows, or per class hits then windows."""
    names, index = np.unique(np.asarray(subjects).astype(str), return_inverse=True)
    if kind == "regression":
        cols = [np.abs(np.asarray(y_pred, float) - np.asarray(y_true, float)), np.ones(len(y_true))]
    else:
        hit = np.asarray(y_pred) == np.asarray(y_true)
        cols = [hit & (y_true == c) for c in classes] + [np.asarray(y_true) == c for c in classes]
    stats = np.stack([np.bincount(index, weights=np.asarray(c, float), minlength=len(names)) for c in cols], 1)
    return names, stats


def pooled_metric(weights: np.ndarray, stats: np.ndarray, kind: str) -> np.ndarray:
    """Metric of each row of subject ``weights`` ([B, N] multiplicities) on [N, k] statistics -> [B]."""
    totals = weights @ stats
    if kind == "regression":
        return totals[:, 0] / totals[:, 1]
    half = stats.shape[1] // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = totals[:, :half] / totals[:, half:]
    return np.nanmean(recall, axis=1)


def cluster_bootstrap(a: SeedStats, b: SeedStats, kind: str, n_boot: int = 2000, seed: int = 0,
                      alpha: float = 0.05) -> dict[str, float]:
    """Paired subject cluster bootstrap of the mean over shared seeds of metric(a) - metric(b)."""
    seeds = sorted(set(a) & set(b))
    nan = {"diff": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan, "n_subjects": 0}
    if not seeds:
        return nan
    names = np.array(sorted(set.intersection(*[set(a[s][0]) & set(b[s][0]) for s in seeds])))
    if len(names) < 2:
        return nan
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(names), np.full(len(names), 1.0 / len(names)), size=n_boot).astype(float)
    weights = np.vstack([np.ones(len(names)), weights])
    total = np.zeros(n_boot + 1)
    for s in seeds:
        for side, sign in ((a, 1.0), (b, -1.0)):
            subj, stats = side[s]
            total += sign * pooled_metric(weights, stats[np.searchsorted(subj, names)], kind)
    draws = total / len(seeds)
    observed, boot = float(draws[0]), draws[1:]
    boot = boot[np.isfinite(boot)]
    far = np.abs(boot - observed) >= abs(observed)
    return {"diff": observed, "ci_low": float(np.quantile(boot, alpha / 2)),
            "ci_high": float(np.quantile(boot, 1 - alpha / 2)), "p": float((1 + far.sum()) / (len(boot) + 1)),
            "n_subjects": len(names)}


def _job_arrays(runs: RunSet, rec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    results = rec.get("results") or [{}]
    name = results[0].get("predictions") or "predictions_repeat0.npz"
    try:  # the job folder's .npz, or the arrays an exported file carries (RunSet.prediction_arrays)
        z = runs.prediction_arrays(rec, str(name))
        y, subjects = np.asarray(z["y_true"]), np.asarray(z["subjects"]).astype(str)
        pred = np.asarray(z["y_prob"] if "y_prob" in z else z["y_pred"])
        classes = np.asarray(z["classes"]) if "classes" in z else None
    except (OSError, KeyError, ValueError):
        return None
    if rec.get("level") == "subject":
        method = (results[0].get("params") or {}).get("aggregation") or "mean"
        names, pred = aggregate(subjects, pred.astype(float), str(method))
        y, subjects = first_per_group(subjects, y), names
    if classes is not None and pred.ndim == 2:
        pred = classes[np.argmax(pred, axis=1)]
    return y, pred, subjects


def _constant_mae_stats(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], trained: list[Any]
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-subject MAE statistics of a seed's constant baseline (fold means from the labels); None if unbuildable."""
    y_all, subj_all = (np.concatenate([p[i] for p in parts]) for i in (0, 2))
    if np.ndim(y_all) != 1:
        return None
    ys, preds, subjects = [], [], []
    for (y, _, subj), train in zip(parts, trained, strict=True):
        if not isinstance(train, list) or not train:
            return None
        mask = np.isin(subj_all, np.asarray(train).astype(str))
        if not mask.any():
            return None
        ys.append(y)
        preds.append(np.full(len(y), float(np.mean(y_all[mask].astype(float)))))
        subjects.append(subj)
    return subject_stats("regression", np.concatenate(ys), np.concatenate(preds), np.concatenate(subjects))


def seed_stats(runs: RunSet, records: Iterable[dict[str, Any]], kind: str, classes: list[Any] | None = None,
               baseline: bool = False) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Seed -> per-subject statistics of the seed's pooled out-of-fold predictions (the constant's: ``baseline``).

    A seed with a missing or unreadable file is left out; ``classes`` default to those of the labels.
    """
    pooled: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    trained: dict[int, list[Any]] = {}
    broken: set[int] = set()
    for rec in records:
        arrays = _job_arrays(runs, rec)
        if arrays is None:
            broken.add(int(rec["seed"]))
        else:
            pooled.setdefault(int(rec["seed"]), []).append(arrays)
            trained.setdefault(int(rec["seed"]), []).append(rec.get("train_groups"))
    kept = {seed: parts for seed, parts in pooled.items() if seed not in broken}
    if baseline and kind == "regression":
        rebuilt = {seed: _constant_mae_stats(parts, trained[seed]) for seed, parts in kept.items()}
        return {seed: built for seed, built in rebuilt.items() if built is not None}
    if classes is None and kind != "regression" and pooled:  # the labels of every readable file, broken seeds too
        classes = sorted(set(np.concatenate([p[0] for parts in pooled.values() for p in parts]).tolist()))
    out = {}
    for seed, parts in kept.items():
        y, pred, subj = (np.concatenate([p[i] for p in parts]) for i in range(3))
        names, stats = subject_stats(kind, y, pred, subj, classes or [])
        if baseline:  # a constant predictor of the first class: balanced accuracy 1/C on every draw
            half = stats.shape[1] // 2
            stats = np.hstack([stats[:, half:half + 1], np.zeros_like(stats[:, 1:half]), stats[:, half:]])
        out[seed] = (names, stats)
    return out
