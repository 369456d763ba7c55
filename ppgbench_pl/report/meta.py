"""Stouffer meta-analysis across datasets of per-cell paired comparisons (MOABB style, issue 19).

Each cell's two-sided p becomes a one-sided z; a dataset's z is the mean over its cells (they share subjects),
weighted sqrt(subjects), or equally when a count is unknown (docs/statistics.md, "Meta-analysis").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.results.inference import ALPHA, one_sided_p, stouffer, z_score

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
    if not math.isfinite(p):
        verdict = "undetermined"
    else:
        verdict = "a_better" if p < alpha / 2 else ("b_better" if p > 1 - alpha / 2 else "no_detectable_difference")
    return {"n_datasets": len(per), "n_cells": int(per["cells"].sum()),
            "datasets": ";".join(f"{d} ({_count_text(n)})" for d, n in zip(per.index, counts, strict=True)),
            "weights": "sqrt_subjects" if known else "equal", "z": z, "p_one_sided": p, "d_z": d_z, "verdict": verdict}


def _count_text(n: float) -> str:
    """A dataset's subject count for the ``datasets`` column; ``?`` when the records do not give it."""
    return str(int(n)) if math.isfinite(n) and n > 0 else "?"


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
