"""Paired effects per cell (difference, seed interval, corrected t, MDD, Holm) and how far verdicts can be trusted.

Families per cell: ``baseline`` (vs the fold's constant), ``controls`` (PPG model vs PRV/MOMENT), ``models``
(PPG pairs). The trust table reads the simulation suite's rates (trust_suite.json; docs/statistics.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report.folder import Page, table
from ppgbench_pl.report.load import in_order, is_control, order_models
from ppgbench_pl.results.fold_entry import fold_entry, student_t_ci
from ppgbench_pl.results.inference import ALPHA, adjusted_mdd_at, corrected_t, family_level, holm, mdd, split_ratio
from ppgbench_pl.results.two_level import seed_term

FAMILIES = ("baseline", "controls", "models")
EFFECT_COLUMNS = ["regime", "task", "metric", "family", "model_a", "model_b", "n_seeds", "n_units", "n_subjects",
                  "mean_a", "mean_b", "diff", "gain", "d_z", "sd_diff", "seed_ci_low", "seed_ci_high", "nb_ci_low",
                  "nb_ci_high", "ratio", "p", "p_holm", "mdd", "mdd_adj", "verdict", "spread_ratio", "var_seed",
                  "calibration"]
MIN_SEEDS = 3


def units(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per ``ok`` job: model, task, regime, seed, fold, value, its fold's baseline, subject counts."""
    rows = [[e.model, e.task, e.regime, e.metric, e.seed, e.fold, e.value, math.nan if e.baseline is None else
             e.baseline, e.n_train or math.nan, e.n_test or math.nan, rec.get("kind") != "regression"]
            for rec in records if (e := fold_entry(rec)) is not None and e.value is not None]
    return pd.DataFrame(rows, columns=["model", "task", "regime", "metric", "seed", "fold", "value",
                                       "baseline", "n_train", "n_test", "higher"])


def comparisons(models: list[str]) -> list[tuple[str, str, str]]:
    """(family, a, b) for one cell: every model vs its constant, PPG models vs controls, PPG model pairs."""
    models = [m for m in order_models(models) if not is_baseline(m)]
    ppg = [m for m in models if not is_control(m)]
    controls = [m for m in models if is_control(m)]  # the constant is left out above
    return ([("baseline", m, "constant") for m in models] + [("controls", m, c) for m in ppg for c in controls]
            + [("models", a, b) for i, a in enumerate(ppg) for b in ppg[i + 1:]])


def paired_diffs(cell: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Matched (seed, fold) rows of a - b: columns seed, fold, a, b, diff, n_train, n_test."""
    left = cell[cell["model"] == a].set_index(["seed", "fold"])
    right = left["baseline"] if b == "constant" else cell[cell["model"] == b].set_index(["seed", "fold"])["value"]
    joined = pd.concat({"a": left["value"], "b": right, "n_train": left["n_train"], "n_test": left["n_test"]},
                       axis=1, join="inner").dropna(subset=["a", "b"])
    joined["diff"] = joined["a"] - joined["b"]
    return joined.reset_index()


def effect(joined: pd.DataFrame, higher: bool, alpha: float = ALPHA) -> dict[str, Any]:
    """Difference, standardised effect, seed CI, corrected-t CI and p, and the MDD of matched units."""
    n_folds = int(joined["fold"].nunique()) if len(joined) else 0
    ratio = split_ratio(joined["n_train"], joined["n_test"], n_folds)
    test = corrected_t(joined["diff"].to_numpy(), ratio, alpha)
    seed_means = joined.groupby("seed")["diff"].mean().to_numpy()
    half = student_t_ci(seed_means)
    mean = float(seed_means.mean()) if len(seed_means) else math.nan
    sign = 1.0 if higher else -1.0
    subjects = (joined["n_train"] + joined["n_test"]).max() if len(joined) else math.nan
    return {"n_seeds": len(seed_means), "n_units": test.n,
            "n_subjects": int(subjects) if pd.notna(subjects) else math.nan, "sd_diff": test.sd,
            "mean_a": float(joined["a"].mean()), "mean_b": float(joined["b"].mean()), "diff": test.mean,
            "gain": sign * test.mean, "d_z": sign * test.d_z, "seed_ci_low": mean - half, "seed_ci_high": mean + half,
            "nb_ci_low": test.ci_low, "nb_ci_high": test.ci_high, "ratio": ratio, "p": test.p,
            "mdd": mdd(test.sd, test.n, ratio, alpha), "spread_ratio": spread_ratio(joined["diff"], joined["seed"]),
            "var_seed": seed_term(seed_means)}


def verdict(row: dict[str, Any], alpha: float = ALPHA) -> str:
    """The new verdict of one comparison from its Holm-adjusted p-value and the sign of its gain."""
    p = row["p_holm"]
    if p is None or math.isnan(p):
        return "undetermined"
    if p >= alpha or row["gain"] == 0:
        return "no_detectable_difference"
    if row["gain"] > 0:
        return "better"
    return "below_baseline" if row["family"] == "baseline" else "worse"


def _cell_rows(cell: pd.DataFrame, regime: str, task: str, alpha: float) -> list[dict[str, Any]]:
    higher = bool(cell["higher"].iloc[0])
    rows = []
    for family, a, b in comparisons(sorted(set(cell["model"]))):
        joined = paired_diffs(cell, a, b)
        if not len(joined):
            continue
        rows.append({"regime": regime, "task": task, "metric": str(cell["metric"].iloc[0]), "family": family,
                     "model_a": a, "model_b": b, **effect(joined, higher, alpha)})
    for family in FAMILIES:
        members = [r for r in rows if r["family"] == family]
        level = family_level(alpha, sum(math.isfinite(r["p"]) for r in members))
        for r, adjusted in zip(members, holm([r["p"] for r in members]), strict=True):
            r["p_holm"] = float(adjusted)
            r["mdd_adj"] = adjusted_mdd_at(r["mdd"], r["n_units"], level, alpha)
            r.update(verdict=verdict(r, alpha), calibration=calibration("corrected_t"))
    return rows


def effects_table(records: Iterable[dict[str, Any]], alpha: float = ALPHA) -> pd.DataFrame:
    """Every cell's paired effects (:data:`EFFECT_COLUMNS`), cells in protocol order."""
    rows: list[dict[str, Any]] = []
    for (regime, task), cell in in_order(units(records), ("regime", "task")).groupby(["regime", "task"], sort=False):
        rows += _cell_rows(cell, regime, task, alpha)
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def calibration(method: str) -> str:
    """The row's calibration label: where the interval it uses, and the seed interval, leave the band."""
    return f"{interval_label(method)} | {interval_label('seed_interval')}"


def finite(values: Any) -> np.ndarray:
    """The finite entries of an array-like (for min/max over p-values that may be NaN)."""
    arr = np.asarray(values, dtype=float)
    return arr[np.isfinite(arr)]


FPR_BAND, POWER_BAND = (0.02, 0.07), (0.7, 0.9)
METHODS = {"two_level": "two-level interval", "corrected_t": "corrected t", "bootstrap": "subject cluster bootstrap",
           "seed_interval": "seed interval", "published_rule": "published CI-overlap rule"}
#: Trust table rows: (verdict, the test it rests on in the suite, how the verdict uses it).
VERDICTS = [
    ("win / tie / loss (compare, effects)", "two_level", "two-level test per cell; BH (compare) or Holm (effects)"),
    ("near chance / above chance", "two_level", "best model vs constant: Holm in the cell, BH over cells"),
    ("no PPG model beats both controls", "two_level",
     "intersection-union of the tests vs each control: false positives at most the single test's; the "
     "power shown is one comparison's (beating two controls needs both)"),
    ("--subject-interval corrected-t (and rows without prediction files)", "corrected_t",
     "Nadeau-Bengio corrected t"),
    ("--subject-interval bootstrap", "bootstrap", "replaces the corrected t's p where it can be built"),
    ("seed interval (seed_ci_*)", "seed_interval", "printed beside; decides nothing"),
    ("published CI-overlap rule", "published_rule", "the published tables' bold and 'meaningfully better'"),
]


@cache
def suite() -> dict[str, Any]:
    """The precomputed suite (``trust_suite.json``)."""
    text = resources.files("ppgbench_pl.report").joinpath("trust_suite.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def spread_ratio(diff: Any, seeds: Any) -> float:
    """K x var(seed means) / mean within-seed variance of paired fold differences (NaN without 2 seeds).

    About 1 for independent training noise, near 0 when the subjects dominate: it tells the noise mixes apart.
    """
    frame = pd.DataFrame({"d": np.asarray(diff, float), "s": np.asarray(seeds)})
    groups = frame.groupby("s")["d"]
    if groups.ngroups < 2 or groups.size().min() < 2:
        return math.nan
    within = float(groups.var(ddof=1).mean())
    between = float(groups.mean().var(ddof=1)) * float(groups.size().mean())
    return between / within if within > 0 else math.nan


def _fmt(row: dict[str, Any]) -> str:
    kind = "MAE" if row["kind"] == "regression" else "balanced accuracy"
    return f"{row['mix']}, {kind}, {row['n']} subjects"


@cache
def interval_label(method: str) -> str:
    """``in band`` or where the method leaves it over the suite (the mix named), for effects/compare rows."""
    rows = [r for r in suite()["scenarios"] if method in r]
    if not rows:
        return "not measured"
    parts = []
    hi = max(rows, key=lambda r: r[method]["fpr"])
    lo = min(rows, key=lambda r: r[method]["fpr"])
    if hi[method]["fpr"] > FPR_BAND[1]:
        parts.append(f"liberal: false-positive rate {hi[method]['fpr']:.2f} ({_fmt(hi)})")
    if lo[method]["fpr"] < FPR_BAND[0]:
        parts.append(f"conservative: false-positive rate {lo[method]['fpr']:.3f} ({_fmt(lo)})")
    top = max(rows, key=lambda r: r[method]["power"])
    if top[method]["power"] > POWER_BAND[1]:
        parts.append(f"power {top[method]['power']:.2f} at its MDD ({_fmt(top)})")
    return f"{METHODS[method]}: " + ("; ".join(parts) if parts else "in band in every mix of the suite")


def closest(effects: pd.DataFrame) -> dict[str, Any] | None:
    """The suite scenario closest to a run: same metric kind, nearest subjects, nearest log spread ratio."""
    base = effects[effects["family"] == "baseline"] if "family" in effects else effects
    ratio = float(np.nanmedian(base["spread_ratio"])) if len(base) and base["spread_ratio"].notna().any() else math.nan
    subjects = float(np.nanmedian(base["n_subjects"])) if len(base) and base["n_subjects"].notna().any() else math.nan
    if not (math.isfinite(ratio) and math.isfinite(subjects)):
        return None
    kind = "regression" if len(base) and str(base["metric"].iloc[0]) == "mae" else "classification"
    rows = [r for r in suite()["scenarios"] if r["kind"] == kind] or suite()["scenarios"]
    n = min({r["n"] for r in rows}, key=lambda v: abs(v - subjects))
    rows = [r for r in rows if r["n"] == n]
    return min(rows, key=lambda r: abs(math.log(max(r["spread_ratio"], 1e-3)) - math.log(max(ratio, 1e-3))))


def trust_table(effects: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per verdict: false-positive rate and power at the MDD, range over the suite and the closest mix."""
    near = closest(effects)
    rows = []
    for verdict, method, how in VERDICTS:
        cases = [r for r in suite()["scenarios"] if method in r]
        if not cases:
            continue
        fpr = [r[method]["fpr"] for r in cases]
        power = [r[method]["power"] for r in cases]
        row = {"verdict": verdict, "test": how, "fpr_range": f"{min(fpr):.3f}-{max(fpr):.3f}",
               "power_range": f"{min(power):.2f}-{max(power):.2f}", "label": interval_label(method)}
        if near is not None and method in near:
            row["fpr_closest_mix"], row["power_closest_mix"] = near[method]["fpr"], near[method]["power"]
        rows.append(row)
    mark = "no mix could be estimated (fewer than 2 seeds or no subject counts)" if near is None else \
        f"closest mix to this run: {_fmt(near)} (spread ratio {near['spread_ratio']:.2f})"
    return pd.DataFrame(rows), mark


def draw_trust(page: Page, effects: pd.DataFrame) -> None:
    """The trust section of the report (its table is also ``tables/trust.csv``)."""
    frame, mark = trust_table(effects)
    meta = suite()
    page.heading("How far the verdicts can be trusted", anchor="trust")
    page.paragraph(f"False-positive rate at alpha 0.05 and power at the MDD each test prints, from "
                   f"{len(meta['scenarios'])} simulated scenarios ({meta['reps']} replicates each; "
                   f"docs/statistics.md, tools/statistics_tables.py). Band: false positives in "
                   f"[{FPR_BAND[0]}, {FPR_BAND[1]}], power {POWER_BAND[0]}-{POWER_BAND[1]}. Marked: {mark}.")
    page.raw(table(frame))
