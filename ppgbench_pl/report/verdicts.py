"""The findings under paired tests with multiplicity control, beside the published counts (docs/statistics.md).

Near chance: per cell the smallest Holm p of its models against their constant; controls: intersection-union.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ppgbench_pl.report.effects import draw_trust, effects_table, finite, trust_table
from ppgbench_pl.report.findings import marked
from ppgbench_pl.report.folder import Page, table, write_tables
from ppgbench_pl.report.load import RunSet
from ppgbench_pl.report.two_level_rows import row_mdd_at, subject_effects
from ppgbench_pl.results.inference import (
    ALPHA,
    benjamini_hochberg,
    family_level,
    holm,
    seeds_needed,
    subjects_needed,
)
from ppgbench_pl.results.two_level import seeds_for, subjects_for

CHANCE_COLUMNS = ["regime", "task", "metric", "published_status", "best_model", "gain", "mdd", "mdd_adj", "p_cell",
                  "q_bh", "paired_status", "beat_baseline", "below_baseline", "seeds_to_detect_gain",
                  "subjects_to_detect_gain"]
CONTROL_COLUMNS = ["regime", "task", "published_status", "p_cell", "q_bh", "paired_status", "winners"]
SHOWN = ["regime", "task", "family", "model_a", "model_b", "n_seeds", "n_units", "diff", "d_z", "seed_ci_low",
         "seed_ci_high", "nb_ci_low", "nb_ci_high", "p", "p_holm", "mdd", "mdd_adj", "verdict", "calibration"]
TWO_LEVEL = ["interval", "tl_ci_low", "tl_ci_high"]
TITLE = "Under paired tests with multiplicity control"


def _chance_row(cell: pd.DataFrame, alpha: float, n_cells: int = 1) -> dict[str, Any]:
    base = cell[cell["family"] == "baseline"]
    positive = base[base["gain"] > 0]
    maybe_better = base[~(base["gain"] <= 0)]  # a better mean, or no mean difference at all (NaN gain)
    tested = finite(positive["p_holm"])
    untested = len(finite(maybe_better["p_holm"])) < len(maybe_better)  # one of them has no p-value
    p_cell = float(tested.min()) if len(tested) else math.nan
    if not len(maybe_better) and len(finite(base["p_holm"])):
        p_cell = 1.0  # tested, and no model has a better mean
    best = base.loc[base["gain"].idxmax()] if len(base) else None
    below = base[base["verdict"] == "below_baseline"]["model_a"].tolist()
    wins = base[(base["gain"] > 0) & (base["p_holm"] < alpha)]["model_a"].tolist()
    level = family_level(alpha, max(len(base), 1) * max(n_cells, 1))  # Holm in the cell, then BH's first step
    seeds, subjects = planned(best, level)
    mdd_adj = math.nan if best is None else row_mdd_at(best, level, alpha)  # from the mdd at the run's alpha
    return {"best_model": "" if best is None else best["model_a"], "seeds_to_detect_gain": seeds,
            "subjects_to_detect_gain": subjects, "mdd_adj": mdd_adj,
            "gain": math.nan if best is None else float(best["gain"]),
            "mdd": math.nan if best is None else float(best["mdd"]), "p_cell": p_cell,
            "below_baseline": ";".join(below), "all_below": bool(len(base)) and len(below) == len(base),
            "wins": ";".join(wins), "untested": untested}


def planned(best: Any, level: float = ALPHA) -> tuple[float, float]:
    """Seeds, or subjects, that would detect the best model's gain with 80 % power at ``level`` (its test; or NaN)."""
    if best is None or not best["gain"] > 0 or not math.isfinite(float(best["sd_diff"])):
        return math.nan, math.nan
    n, gain = best["n_subjects"], float(best["gain"])
    known = pd.notna(n) and n > 0
    if best.get("interval") == "two-level":
        args = (float(best["var_subject"]), float(best["var_seed"]), int(best["n_seeds"]), int(n) if known else 2)
        seeds, subjects = seeds_for(*args, gain, level), subjects_for(*args, gain, level) if known else None
    else:
        folds = max(int(round(best["n_units"] / max(best["n_seeds"], 1))), 1)
        seeds = seeds_needed(float(best["sd_diff"]), gain, folds, float(best["ratio"]), alpha=level)
        subjects = subjects_needed(float(best["sd_diff"]), gain, int(n), int(best["n_seeds"]), folds,
                                   float(best["ratio"]), alpha=level) if known else None
    return (math.nan if seeds is None else float(seeds)), (math.nan if subjects is None else float(subjects))


def _per_cell(effects: pd.DataFrame, published: pd.DataFrame, row: Any) -> pd.DataFrame:
    """``row(cell, its effects)`` for each cell of a published table, with ``q_bh`` over the cells' ``p_cell``."""
    frame = pd.DataFrame([{"regime": cell.regime, "task": cell.task, "published_status": cell.status,
                           **row(cell, effects[(effects["regime"] == cell.regime) & (effects["task"] == cell.task)])}
                          for cell in published.itertuples()])
    if not frame.empty:
        frame["q_bh"] = benjamini_hochberg(frame["p_cell"])
    return frame


def paired_chance(effects: pd.DataFrame, published: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per cell of the published chance table: its status there and under the paired rule."""
    frame = _per_cell(effects, published, lambda cell, part: {
        "metric": cell.metric, **_chance_row(part, alpha, len(published))})
    if frame.empty:
        return pd.DataFrame(columns=CHANCE_COLUMNS)
    above = frame["q_bh"] < alpha
    # near chance only if every model with a better mean was tested: else it might beat the constant
    frame["paired_status"] = ["above_chance" if a else "below_baseline" if r.all_below else
                              "undetermined" if math.isnan(r.p_cell) or r.untested else "near_chance"
                              for a, r in zip(above, frame.itertuples(), strict=True)]
    frame["beat_baseline"] = [w if a else "" for w, a in zip(frame["wins"], above, strict=True)]
    return frame[CHANCE_COLUMNS]


def _control_p(part: pd.DataFrame) -> tuple[float, list[str]]:
    """Cell p-value (Holm over PPG models of their intersection-union p) and the models it rests on."""
    ctrl = part[part["family"] == "controls"]
    models, pvals = [], []
    for model, rows in ctrl.groupby("model_a", sort=False):
        p = rows["p"].to_numpy(dtype=float)
        models.append(str(model))
        pvals.append(math.nan if any(math.isnan(x) for x in p) else
                     (float(p.max()) if (rows["gain"] > 0).all() else 1.0))
    if not models:
        return math.nan, []
    adjusted = holm(pvals)
    ok = finite(adjusted)
    return (float(ok.min()) if len(ok) else math.nan), [m for m, p in zip(models, adjusted, strict=True)
                                                       if p == (ok.min() if len(ok) else None)]


def paired_controls(effects: pd.DataFrame, published: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per assessable cell of the published control table, with its paired verdict."""
    cells = published[published["status"].isin(("beaten", "not_beaten", "undetermined"))]
    frame = _per_cell(effects, cells, lambda cell, part: dict(zip(("p_cell", "best"), _control_p(part), strict=True)))
    if frame.empty:
        return pd.DataFrame(columns=CONTROL_COLUMNS)
    beaten = frame["q_bh"] < alpha
    frame["paired_status"] = ["undetermined" if math.isnan(p) else ("beaten" if b else "not_beaten")
                              for p, b in zip(frame["p_cell"], beaten, strict=True)]
    frame["winners"] = [";".join(m) if b else "" for m, b in zip(frame["best"], beaten, strict=True)]
    return frame[CONTROL_COLUMNS]


def count_lines(chance: pd.DataFrame, controls: pd.DataFrame, alpha: float = ALPHA) -> list[str]:
    """The findings under both rules, side by side (the page and findings.md lead with them)."""
    n, paired = len(chance), chance["paired_status"].value_counts()
    pub_near = int((chance["published_status"] == "near_chance").sum())
    near, below, und = (int(paired.get(s, 0)) for s in ("near_chance", "below_baseline", "undetermined"))
    lines = [f"Near chance: {pub_near} of {n} cells under the published CI-overlap rule; {near} of {n} under "
             f"paired corrected t-tests (Nadeau-Bengio, Holm over each cell's models, Benjamini-Hochberg "
             f"over the {n} cells, alpha {alpha:g})" + (f", plus {below} below baseline" if below else "")
             + (f", {und} undetermined" if und else "") + "."]
    if len(controls):
        m = len(controls)
        pub = int((controls["published_status"] == "not_beaten").sum())
        hold = int((controls["paired_status"] == "not_beaten").sum())
        lines.append(f"Controls hold: {pub} of {m} assessable cells under the published rule; {hold} of {m} "
                     "under paired tests (intersection-union over the controls, Holm over the PPG models "
                     f"of a cell, Benjamini-Hochberg over the {m} cells).")
    mdds = chance[chance["paired_status"] == "near_chance"]
    if len(mdds):
        parts = [f"{r.task} ({r.regime}) {r.mdd:.3g}, {r.mdd_adj:.3g} after correction" + _plan_text(r)
                 for r in mdds.itertuples() if not math.isnan(r.mdd)]
        lines.append("Near-chance cells could still hide a gain below their minimum detectable difference "
                     f"(80 % power, alpha {alpha:g}; best model vs constant; in brackets the seeds or subjects that "
                     "would detect the best model's observed gain at the level the finding is decided, after "
                     "Holm and Benjamini-Hochberg): " + "; ".join(parts) + ".")
    if below:
        cells = chance[chance["paired_status"] == "below_baseline"]
        lines.append("Below baseline (every model significantly worse than the constant: training failed or "
                     "the task is mis-specified, not chance): "
                     + "; ".join(f"{r.task} ({r.regime})" for r in cells.itertuples()) + ".")
    return lines


def _plan_text(row: Any) -> str:
    parts = [f"{int(v)} {what}" for v, what in ((row.seeds_to_detect_gain, "seeds"),
                                                (row.subjects_to_detect_gain, "subjects")) if math.isfinite(v)]
    return f" ({' or '.join(parts)})" if parts else ""


@dataclass
class PairedFindings:
    """The effects, the two paired cell tables, the count lines and the files written."""

    effects: pd.DataFrame
    chance: pd.DataFrame
    controls: pd.DataFrame
    lines: list[str]
    written: list[Path] = field(default_factory=list)


def compute(records: list[dict[str, Any]], chance: pd.DataFrame, controls: pd.DataFrame, out: Path,
            alpha: float, interval: str = "two-level", runs: RunSet | None = None) -> PairedFindings:
    """The paired effects (with ``interval``, read from ``runs``' predictions) and verdicts, written as CSVs."""
    table = effects_table(records, alpha)
    if interval != "corrected-t" and runs is not None:
        table = subject_effects(table, runs, interval, alpha)
    pchance = paired_chance(table, chance, alpha)
    pcontrols = paired_controls(table, controls, alpha)
    result = PairedFindings(table, pchance, pcontrols, count_lines(pchance, pcontrols, alpha))
    result.written = write_tables(out, {"effects": table, "chance_cells_paired": pchance,
                                        "control_cells_paired": pcontrols, "trust": trust_table(table)[0]})
    return result


def draw(page: Page, paired: PairedFindings, flags: Mapping[tuple[str, str], str] | None = None) -> None:
    """The findings under paired tests, the trust table and the effects; ``flags`` marks overlapping cells."""
    page.heading("Findings under paired tests", level=3, anchor="paired_findings")
    page.bullets(paired.lines, "findings")
    page.details("Per cell: published status beside the paired status, with the MDD",
                 table(*marked(paired.chance, flags or {}, "p_cell: smallest Holm-adjusted p of the cell's models "
                                                           "against their constant; q_bh: Benjamini-Hochberg over "
                                                           "the cells."),
                       text_columns=("beat_baseline", "below_baseline")))
    page.details("Per cell: the controls under both rules",
                 table(paired.controls, "p_cell: Holm over the PPG models of their largest p against the "
                                        "controls; q_bh: Benjamini-Hochberg over the assessable cells.",
                       text_columns=("winners",)))
    draw_trust(page, paired.effects)
    page.heading("Paired effects (seed interval and subject-level interval)", anchor="effects")
    page.paragraph("diff = a - b over matched seed x fold units; d_z = gain / sd of the differences "
                   "(positive: a better). seed_ci: Student-t over the seed means of the differences "
                   "(split-to-split noise only, the published unit). p, mdd and tl_ci: the two-level test "
                   "(subject term from the per-subject predictions plus seed term; subject-level: it keeps "
                   "the uncertainty of having sampled these subjects) where interval = two-level, else the "
                   "Nadeau-Bengio corrected t over the seed x fold differences (nb_ci, always shown). "
                   "p_holm: Holm within the family of the cell. mdd: the "
                   "smallest difference detected with 80 % power at alpha 0.05; mdd_adj: the same at the "
                   "level Holm's first step demands (alpha / comparisons in the family). calibration: where "
                   "the intervals of the row leave the simulation suite's band. docs/statistics.md has "
                   "the formulas.", "note")
    if paired.effects.empty:
        page.paragraph("No comparison has matched units.", "note")
        return
    boot = [c for c in (*TWO_LEVEL, "boot_ci_low", "boot_ci_high", "p_nb") if c in paired.effects.columns]
    if "boot_ci_low" in boot:
        page.paragraph("Subject-level interval: the subject cluster bootstrap (--subject-interval bootstrap): p "
                       "and p_holm are the bootstrap's where interval = bootstrap, boot_ci its percentile "
                       "interval, p_nb the corrected t's; rows the bootstrap cannot build keep the corrected t "
                       "and say why.", "note")
    page.details(f"All {len(paired.effects)} comparisons", table(*marked(paired.effects[SHOWN + boot], flags or {}),
                                                                 text_columns=tuple(boot[:1])))
