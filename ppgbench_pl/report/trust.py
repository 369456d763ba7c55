"""How far each verdict can be trusted: the simulation suite's rates, and the mix closest to this run (issue 31).

The rates come from ``trust_suite.json`` (written by ``tools/statistics_tables.py``; docs/statistics.md,
"Calibration"); the closest mix is found from the run's median :func:`spread_ratio` and subject count.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ppgbench_pl.report.html import Page

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


def draw(page: Page, effects: pd.DataFrame) -> pd.DataFrame:
    """The trust section of the report; returns its table (written as ``tables/trust.csv``)."""
    from ppgbench_pl.report.html import table

    frame, mark = trust_table(effects)
    meta = suite()
    page.heading("How far the verdicts can be trusted", anchor="trust")
    page.paragraph(f"False-positive rate at alpha 0.05 and power at the MDD each test prints, from "
                   f"{len(meta['scenarios'])} simulated scenarios ({meta['reps']} replicates each; "
                   f"docs/statistics.md, tools/statistics_tables.py). Band: false positives in "
                   f"[{FPR_BAND[0]}, {FPR_BAND[1]}], power {POWER_BAND[0]}-{POWER_BAND[1]}. Marked: {mark}.")
    page.raw(table(frame))
    return frame
