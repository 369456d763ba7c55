"""``ppgbench compare RUN_A RUN_B``: one model of run A against one of run B, cell by cell (issue 19).

Benjamini-Hochberg over the cells, Stouffer across datasets per regime, a paper table rounded to the interval's
precision; cells whose seeds or folds differ are refused (docs/statistics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.report import two_level_rows as tl
from ppgbench_pl.report.effects import calibration, effect, units
from ppgbench_pl.report.load import ReportError, is_control, load_runs, order_regimes, order_tasks
from ppgbench_pl.report.tables import higher_is_better, to_latex, to_markdown, unit_of
from ppgbench_pl.results.inference import (
    ALPHA,
    benjamini_hochberg,
    family_level,
    one_sided_p,
    stouffer,
    z_score,
)

COMPARE_COLUMNS = ["regime", "task", "metric", "model_a", "model_b", "n_seeds", "n_units", "n_subjects", "mean_a",
                   "mean_b", "diff", "gain", "d_z", "seed_ci_low", "seed_ci_high", "nb_ci_low", "nb_ci_high", "p",
                   "p_bh", "mdd", "mdd_adj", "outcome", "calibration"]


@dataclass
class Comparison:
    """The per-cell table, the refused cells, the one-line summary and the Stouffer meta-analysis per regime."""

    table: pd.DataFrame
    refused: list[str] = field(default_factory=list)
    summary: str = ""
    meta: pd.DataFrame = field(default_factory=pd.DataFrame)
    caption: str = ""  # the summary with the runs named by folder name, not path (compare.tex goes into papers)


def _pick(frame: pd.DataFrame, run: Path, wanted: str | None) -> str:
    present = sorted(set(frame["model"]))
    if wanted is not None:
        if wanted not in present:
            raise ReportError(f"{run}: no model '{wanted}'; it has {', '.join(present)}")
        return wanted
    tested = [m for m in present if not is_control(m)]
    if len(tested) != 1:
        raise ReportError(f"{run}: {len(tested)} PPG-specific models ({', '.join(tested) or 'none'}); name the "
                          "ones to compare with --model A --model B")
    return tested[0]


def compare_runs(run_a: str | Path, run_b: str | Path, models: tuple[str | None, str | None] = (None, None),
                 alpha: float = ALPHA, interval: str = "two-level") -> Comparison:
    """Compare model ``models[0]`` of ``run_a`` with ``models[1]`` of ``run_b`` per cell (module docstring).

    Raises:
        ReportError: A folder is not a run, a model is missing or ambiguous, or no cell can be compared.

    """
    tl.check_interval(interval)
    sources = (load_runs([run_a]), load_runs([run_b]))
    ua, ub = units(sources[0].records), units(sources[1].records)
    ma, mb = _pick(ua, Path(run_a), models[0]), _pick(ub, Path(run_b), models[1])
    ua, ub = ua[ua["model"] == ma], ub[ub["model"] == mb]
    rows, refused = [], []
    for regime in order_regimes(set(ua["regime"]) & set(ub["regime"])):
        ra, rb = ua[ua["regime"] == regime], ub[ub["regime"] == regime]
        for task in order_tasks(set(ra["task"]) & set(rb["task"])):
            a, b = (r[r["task"] == task].set_index(["seed", "fold"]) for r in (ra, rb))
            if set(a.index) != set(b.index):  # the same seeds x folds, or refused
                refused.append(f"{task} ({regime})")
                continue
            joined = pd.concat({"a": a["value"], "b": b["value"], "n_train": a["n_train"], "n_test": a["n_test"]},
                               axis=1, join="inner").reset_index()
            joined["diff"] = joined["a"] - joined["b"]
            rows.append({"regime": regime, "task": task, "metric": str(a["metric"].iloc[0]), "model_a": ma,
                         "model_b": mb, **effect(joined, bool(a["higher"].iloc[0]), alpha)})
    if not rows:
        why = f"seeds or folds differ in every shared cell: {', '.join(refused)}" if refused else \
            "the runs share no task x regime cell"
        raise ReportError(f"nothing to compare between {run_a} ({ma}) and {run_b} ({mb}): {why}")
    frame = pd.DataFrame(rows)
    frame["calibration"] = calibration("corrected_t")
    if interval == "corrected-t":
        table = frame.assign(p_bh=benjamini_hochberg(frame["p"]))
    else:  # the subject-level interval where built, Benjamini-Hochberg over every cell
        table = tl.subject_level(frame, tl.CellStats(sources), interval, [], benjamini_hochberg, alpha)
        table = table.rename(columns={"p_adj": "p_bh"})
    table["outcome"] = [outcome(p, g, alpha) for p, g in zip(table["p_bh"], table["gain"], strict=True)]
    if interval != "two-level":  # the two-level rows got theirs from their own df
        level = family_level(alpha, int(table["p"].notna().sum()))  # the MDD of the test that decides (BH)
        table["mdd_adj"] = [tl.row_mdd_at(r, level, alpha) for r in table.to_dict("records")]
    extra = [c for c in tl.TL_COLUMNS + tl.BOOT_COLUMNS if c in table.columns and c not in COMPARE_COLUMNS]
    table = table[COMPARE_COLUMNS + list(dict.fromkeys(extra))]
    counts = table["outcome"].value_counts()
    test = {"two-level": "two-level interval where built, else corrected t", "corrected-t": "corrected t",
            "bootstrap": "subject cluster bootstrap where built, else corrected t"}[interval]
    untested = f", {counts['undetermined']} undetermined (no p-value)" if counts.get("undetermined", 0) else ""
    summary = (f"{run_a}:{ma} vs {run_b}:{mb} over {len(table)} cells: {counts.get('win', 0)} wins, "
               f"{counts.get('tie', 0)} ties, {counts.get('loss', 0)} losses{untested} ({test}, "
               f"Benjamini-Hochberg over the cells, alpha {alpha:g}); median MDD {table['mdd'].median():.3g}, "
               f"{table['mdd_adj'].median():.3g} after the correction")
    meta = meta_table(table, alpha)
    meta = meta[meta["n_datasets"] >= 2] if len(meta) else meta  # a meta-analysis needs two datasets
    caption = summary.replace(f"{run_a}:{ma} vs {run_b}:{mb}", f"{Path(run_a).name}:{ma} vs {Path(run_b).name}:{mb}", 1)
    return Comparison(table, refused, summary, meta.reset_index(drop=True), caption)


def outcome(p_adjusted: float, gain: float, alpha: float = ALPHA) -> str:
    """``win`` / ``loss`` (significant, by the sign of the gain), ``tie``, or ``undetermined`` without a p."""
    if not math.isfinite(p_adjusted):
        return "undetermined"
    if p_adjusted < alpha and gain > 0:
        return "win"
    return "loss" if p_adjusted < alpha and gain < 0 else "tie"


def refused_line(comparison: Comparison) -> str | None:
    """The one line naming the refused cells (None when none was)."""
    if not comparison.refused:
        return None
    return (f"refused {len(comparison.refused)} cells whose seeds or folds do not match: "
            f"{', '.join(comparison.refused)}")


def write_comparison(comparison: Comparison, output: Path) -> Path:
    """Write ``compare.csv``, ``compare.md`` (summary line and table) and ``compare.tex`` (paper table) atomically."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{output}: cannot create the output folder ({exc.strerror or exc})") from None
    path = output / "compare.csv"
    write_text_atomic(path, comparison.table.to_csv(index=False))
    refused = refused_line(comparison)
    text = [f"# {comparison.summary}", "", *([refused, ""] if refused else []), to_markdown(comparison.table.round(4))]
    if line := meta_line(comparison.meta):
        write_text_atomic(output / "compare_meta.csv", comparison.meta.to_csv(index=False))
        text += ["", f"## {line}", "", to_markdown(comparison.meta.round(4))]
    write_text_atomic(output / "compare.md", "\n".join(text) + "\n")
    write_text_atomic(output / "compare.tex", to_latex(paper_table(comparison.table),
                                                       comparison.caption or comparison.summary))
    return path


def compare(run_a: str | Path, run_b: str | Path, model_a: str | None = None, model_b: str | None = None,
            alpha: float = ALPHA, output_dir: str | Path | None = None,
            subject_interval: str = "two-level") -> Comparison:
    """``pb.compare``: :func:`compare_runs` (``model_b`` defaults to ``model_a``), written if ``output_dir``."""
    result = compare_runs(run_a, run_b, (model_a, model_b if model_b is not None else model_a), alpha, subject_interval)
    if output_dir is not None:
        write_comparison(result, Path(output_dir))
    return result


META_COLUMNS = ["regime", "model_a", "model_b", "n_datasets", "n_cells", "datasets", "weights", "z", "p_one_sided",
                "d_z", "verdict"]


def _combine(part: pd.DataFrame, alpha: float) -> dict[str, Any]:
    from scipy.special import ndtr

    part = part[np.isfinite(part["p"].to_numpy(dtype=float))]
    z_cell = z_score(one_sided_p(part["p"], part["gain"]))
    frame = part.assign(z=z_cell, dataset=[dataset_of(t) for t in part["task"]])
    per = frame.groupby("dataset", sort=True).agg(z=("z", "mean"), d_z=("d_z", "mean"),
                                                 n=("n_subjects", "max"), cells=("z", "size"))
    counts = per["n"].to_numpy(dtype=float)
    known = bool(np.all(np.isfinite(counts) & (counts > 0)))
    weights = np.sqrt(counts) if known else np.ones(len(counts))  # equal weights when a count is missing
    z, p = stouffer(ndtr(-per["z"].to_numpy(dtype=float)), weights)
    ok = np.isfinite(per["d_z"].to_numpy(dtype=float)) & np.isfinite(weights)
    d_z = float(np.sum(weights[ok] * per["d_z"].to_numpy()[ok]) / np.sum(weights[ok])) if ok.any() else math.nan
    verdict = ("undetermined" if not math.isfinite(p) else "a_better" if p < alpha / 2
               else "b_better" if p > 1 - alpha / 2 else "no_detectable_difference")
    return {"n_datasets": len(per), "n_cells": int(per["cells"].sum()),
            "datasets": ";".join(f"{d} ({int(n) if math.isfinite(n) and n > 0 else '?'})"  # ? when unknown
                                 for d, n in zip(per.index, counts, strict=True)),
            "weights": "sqrt_subjects" if known else "equal", "z": z, "p_one_sided": p, "d_z": d_z, "verdict": verdict}


def meta_table(table: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Per (regime, model_a, model_b): Stouffer's Z over the datasets of the cells, tested two-sided at alpha."""
    rows = []
    if not table.empty:
        for (regime, a, b), part in table.groupby(["regime", "model_a", "model_b"], sort=False):
            rows.append({"regime": regime, "model_a": a, "model_b": b, **_combine(part, alpha)})
    return pd.DataFrame(rows, columns=META_COLUMNS)


def meta_line(meta: pd.DataFrame) -> str | None:
    """One line per regime of the meta-analysis (None when there is none)."""
    if meta.empty:
        return None
    weighting = {"sqrt_subjects": "weights sqrt(subjects)", "equal": "equal weights: subject counts unknown"}
    parts = [f"{r.regime}: Z {r.z:.3g}, one-sided p {r.p_one_sided:.3g} over {r.n_datasets} dataset(s) "
             f"({weighting[r.weights]}; {r.verdict})" for r in meta.itertuples()]
    return "Stouffer across datasets: " + "; ".join(parts)


WORDS = {"win": "A better", "loss": "A worse", "tie": "no detectable difference",
         "undetermined": "undetermined (no p-value)"}


def decimals_of(half_width: float) -> int:
    """Decimals that keep two significant digits of a CI half-width (3 when it is unknown or zero)."""
    if not (math.isfinite(half_width) and half_width > 0):
        return 3
    return max(0, 1 - math.floor(math.log10(half_width)))


def _round(value: float, places: int) -> str:
    return "" if not math.isfinite(value) else f"{value:.{places}f}"


def paper_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: regime, task, metric (unit), direction, means, difference with its CI, word, p, MDDs."""
    rows = []
    for r in table.to_dict("records"):
        low, high = ("tl_ci_low", "tl_ci_high") if r.get("interval") == "two-level" else ("nb_ci_low", "nb_ci_high")
        places = decimals_of((float(r[high]) - float(r[low])) / 2)
        higher = higher_is_better(str(r["task"]), str(r["metric"]))
        unit = unit_of(str(r["task"]))
        rows.append({
            "regime": r["regime"], "task": r["task"], "metric": str(r["metric"]) + (f" ({unit})" if unit else ""),
            "direction": "higher is better" if higher else "lower is better",
            "mean A": _round(float(r["mean_a"]), places), "mean B": _round(float(r["mean_b"]), places),
            "A - B [95% CI]": f"{_round(float(r['diff']), places)} [{_round(float(r[low]), places)}, "
                              f"{_round(float(r[high]), places)}]",
            "verdict": WORDS.get(str(r["outcome"]), str(r["outcome"])),
            "p (BH)": _round(float(r["p_bh"]), 3), "MDD": _round(float(r["mdd"]), places),
            "MDD after BH": _round(float(r["mdd_adj"]), places),
            **({"p from": r["interval"]} if "interval" in r else {}),
        })
    return pd.DataFrame(rows)
