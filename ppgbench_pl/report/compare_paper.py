"""``ppgbench compare``'s table for a paper: metric, unit, direction, both means and the verdict in words (issue 32).

Every number of a row is rounded to two significant digits of its interval's half-width; written as
``compare.tex`` by :func:`.tables.to_latex`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ppgbench_pl.report.tables import to_latex, unit_of
from ppgbench_pl.results.fold_entry import task_facts

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
        half = (float(r[high]) - float(r[low])) / 2
        places = decimals_of(half)
        higher = task_facts(str(r["task"]))[2]
        if higher is None:
            higher = str(r["metric"]) != "mae"
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


def write_latex(table: pd.DataFrame, caption: str, path: Path) -> Path:
    """``compare.tex``: the paper table as a booktabs table float, written atomically."""
    from ppgbench_pl.atomic_io import write_text_atomic

    write_text_atomic(path, to_latex(paper_table(table), caption))
    return path
