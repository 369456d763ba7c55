"""The report's search-noise section (issue 19 item 4): what other search seeds add, and which verdicts flip."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.report import effects, findings, verdicts
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.folder import Page, table, write_tables
from ppgbench_pl.report.load import in_order
from ppgbench_pl.results.fold_entry import short_mean, student_t_ci

NOISE_COLUMNS = ["regime", "task", "model", "metric", "search_seeds", "n_units", "sd_search", "sd_folds",
                 "search_share", "sd_cell_mean", "seed_ci95", "cell_mean_sd_over_ci"]
FLIP_COLUMNS = ["search_seed", "rule", "verdict_of", "regime", "task", "published_search", "this_search"]


@dataclass
class SearchNoise:
    """The variance table, the flipped verdicts, the summary lines and the files written."""

    noise: pd.DataFrame
    flips: pd.DataFrame
    lines: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


def has_search_seeds(record: dict[str, Any]) -> bool:
    """Whether an ``ok`` record holds searches of other search seeds."""
    return record.get("status") == "ok" and bool(record.get("search_seed_results"))


def _value(entries: list[dict[str, Any]], metric: str) -> float | None:
    values = [float(v) for e in entries if isinstance(v := (e.get("metrics") or {}).get(metric), int | float)
              and math.isfinite(v)]
    return short_mean(values) if values else None


def seed_units(records: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (job, search seed): the fold value (mean over the repeats of that search seed)."""
    rows = []
    for rec in filter(has_search_seeds, records):
        metric = str(rec["metric"])
        by_seed: dict[int, list[dict[str, Any]]] = {0: list(rec.get("results") or [])}
        for entry in rec["search_seed_results"]:
            by_seed.setdefault(int(entry.get("search_seed", 0)), []).append(entry)
        for k, entries in sorted(by_seed.items()):
            if (value := _value(entries, metric)) is not None:
                rows.append({"model": rec["model"], "task": rec["task"], "regime": rec["regime"], "metric": metric,
                             "seed": int(rec["seed"]), "fold": int(rec["fold"]), "search_seed": k, "value": value})
    return pd.DataFrame(rows, columns=["model", "task", "regime", "metric", "seed", "fold", "search_seed", "value"])


def _noise_row(cell: pd.DataFrame) -> dict[str, Any]:
    wide = cell.pivot_table(index=["seed", "fold"], columns="search_seed", values="value").dropna()
    within = wide.var(axis=1, ddof=1).mean() if wide.shape[1] > 1 else math.nan
    # the share: mean within-unit variance over the total variance, both population variances, so that
    # total = mean within + variance of the unit means and the share lies in [0, 1]
    pop_within = float(wide.var(axis=1, ddof=0).mean()) if wide.shape[1] > 1 else math.nan
    total = float(np.var(wide.to_numpy())) if wide.size > 1 else math.nan
    published = wide[0] if 0 in wide.columns else pd.Series(dtype=float)
    seed_means = published.groupby(level="seed").mean().to_numpy()
    cell_means = wide.mean(axis=0).to_numpy()
    sd_cell = float(np.std(cell_means, ddof=1)) if len(cell_means) > 1 else math.nan
    ci = student_t_ci(seed_means)
    return {"search_seeds": ";".join(str(int(k)) for k in wide.columns), "n_units": len(wide),
            "sd_search": math.sqrt(within) if math.isfinite(within) else math.nan,
            "sd_folds": float(published.std(ddof=1)) if len(published) > 1 else math.nan,
            "search_share": pop_within / total if total > 0 else math.nan, "sd_cell_mean": sd_cell,
            "seed_ci95": ci, "cell_mean_sd_over_ci": sd_cell / ci if ci > 0 else math.nan}


def view(records: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The records with search seed ``k`` standing in for the published search wherever a job has it."""
    return [dict(rec, results=[e for e in rec["search_seed_results"] if int(e.get("search_seed", 0)) == k])
            if k and has_search_seeds(rec) else rec for rec in records]


def verdicts_of(records: list[dict[str, Any]], alpha: float, ci_unit: str) -> dict[tuple[str, ...], str]:
    """Every verdict the report draws: (rule, what, regime, task) -> verdict."""
    scores, rule = Scores(records, ci_unit), Rule("ci", alpha)
    chance, controls = findings.chance_cells(scores, rule), findings.control_cells(scores, rule)
    table = effects.effects_table(records, alpha)
    out: dict[tuple[str, ...], str] = {}
    for rule_name, frame, what, column in (
            ("published", chance, "near chance", "status"), ("published", controls, "controls hold", "status"),
            ("paired", verdicts.paired_chance(table, chance, alpha), "near chance", "paired_status"),
            ("paired", verdicts.paired_controls(table, controls, alpha), "controls hold", "paired_status")):
        out.update({(rule_name, what, r.regime, r.task): str(getattr(r, column)) for r in frame.itertuples()})
    for row in table.itertuples():
        out[("paired", f"{row.model_a} vs {row.model_b}", row.regime, row.task)] = str(row.verdict)
    return out


def flip_table(records: list[dict[str, Any]], seeds: list[int], alpha: float,
               ci_unit: str) -> tuple[pd.DataFrame, int]:
    """The verdicts that change under another search seed, and how many verdicts were compared."""
    cells = {(r["regime"], r["task"]) for r in filter(has_search_seeds, records)}
    published = {key: v for key, v in verdicts_of(records, alpha, ci_unit).items() if (key[2], key[3]) in cells}
    rows = []
    for k in (s for s in seeds if s):
        other = verdicts_of(view(records, k), alpha, ci_unit)
        for key, verdict in published.items():
            if other.get(key, "missing") != verdict:
                rows.append({"search_seed": k, "rule": key[0], "verdict_of": key[1], "regime": key[2],
                             "task": key[3], "published_search": verdict, "this_search": other.get(key, "missing")})
    return pd.DataFrame(rows, columns=FLIP_COLUMNS), len(published) * (len(seeds) - 1)


def compute(records: list[dict[str, Any]], out: Path, alpha: float, ci_unit: str = "seed") -> SearchNoise:
    """The section's tables (written under ``out/tables`` when the runs have search seeds) and findings."""
    units = seed_units(records)
    if units.empty:
        return SearchNoise(pd.DataFrame(columns=NOISE_COLUMNS), pd.DataFrame(columns=FLIP_COLUMNS))
    seeds = sorted(int(k) for k in set(units["search_seed"]))
    noise = pd.DataFrame([{"regime": regime, "task": task, "model": model, "metric": one["metric"].iloc[0],
                           **_noise_row(one)} for (regime, task, model), one
                          in in_order(units).groupby(["regime", "task", "model"], sort=False)], columns=NOISE_COLUMNS)
    flips, checked = flip_table(records, seeds, alpha, ci_unit)
    cells = noise[["regime", "task"]].drop_duplicates()
    lines = [f"Search noise: search seeds {seeds} in {len(cells)} cells ({len(noise)} model cells); "
             f"the median model cell's fold value moves by sd {noise['sd_search'].median():.3g} over search "
             f"seeds ({noise['search_share'].median():.0%} of the variance of its fold values), and its "
             f"cell mean by sd {noise['sd_cell_mean'].median():.3g}, "
             f"{noise['cell_mean_sd_over_ci'].median():.2g} times its published seed CI half-width."]
    if flips.empty:
        lines.append(f"No verdict flips under another search seed ({checked} verdicts compared: the "
                     "published and paired near-chance and controls-hold statuses and every paired comparison).")
    else:
        named = "; ".join(f"{r.task} ({r.regime}) {r.rule} {r.verdict_of}: {r.published_search} -> "
                          f"{r.this_search} (search seed {r.search_seed})" for r in flips.head(10).itertuples())
        more = f" and {len(flips) - 10} more" if len(flips) > 10 else ""
        lines.append(f"{len(flips)} of {checked} verdicts flip under another search seed: {named}{more}.")
    return SearchNoise(noise, flips, lines, write_tables(out, {"search_noise": noise, "search_flips": flips}))


def draw(page: Page, result: SearchNoise) -> None:
    """The page's search-noise section."""
    page.heading("Search-noise sensitivity", anchor="search_noise")
    if result.noise.empty:
        page.paragraph("One search per seed x fold in these runs (search_seeds [0], the published protocol), so "
                       "the search noise is not measured and no interval contains it. Give the MLP probe or "
                       "finetune regime search_seeds: [0, 1, 2] to repeat each search with other random streams "
                       "on the same split.", "note")
        return
    page.bullets(result.lines, "findings")
    page.raw(table(result.noise, "sd_search: sd of a fold value over search seeds (pooled over seed x fold); "
                                 "sd_folds: sd of the published fold values; search_share: within-unit share "
                                 "of the variance; sd_cell_mean: sd over search seeds of the cell mean; "
                                 "seed_ci95: the published CI half-width.", text_columns=("search_seeds",)))
    if not result.flips.empty:
        page.details(f"{len(result.flips)} verdicts that flip under another search seed", table(result.flips))
