"""``ppgbench compare RUN_A RUN_B``: one model of run A against one of run B, cell by cell (issue 19).

Per task x regime cell present in both runs: the paired difference a - b on the matched (seed, fold)
units, the seed interval and the subject-level interval (corrected t, as in the report's effects), the
raw p-value and the Benjamini-Hochberg one over the compared cells (the family: every cell this command
compares), the MDD, and win / tie / loss (a win is a significantly better a after the correction). A cell
whose seeds or folds differ between the runs is refused (a difference there would mix splits); the
refused cells are named in one line. Torch-free, like the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ppgbench_pl.report.effects import effect, units
from ppgbench_pl.report.load import ReportError, is_control, load_runs, order_regimes, order_tasks
from ppgbench_pl.results.inference import ALPHA, benjamini_hochberg

COMPARE_COLUMNS = ["regime", "task", "metric", "model_a", "model_b", "n_seeds", "n_units", "mean_a", "mean_b",
                   "diff", "gain", "d_z", "seed_ci_low", "seed_ci_high", "nb_ci_low", "nb_ci_high", "p",
                   "p_bh", "mdd", "outcome"]


@dataclass
class Comparison:
    """The per-cell table, the cells refused for mismatched seeds or folds, and the one-line summary."""

    table: pd.DataFrame
    refused: list[str] = field(default_factory=list)
    summary: str = ""


def _pick(frame: pd.DataFrame, run: Path, wanted: str | None) -> str:
    """The model to compare in a run: the one named, else its only PPG-specific model."""
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


def _grid(part: pd.DataFrame) -> set[tuple[int, int]]:
    return set(zip(part["seed"].astype(int), part["fold"].astype(int), strict=True))


def _cell(a: pd.DataFrame, b: pd.DataFrame, alpha: float) -> dict[str, object]:
    left = a.set_index(["seed", "fold"])
    right = b.set_index(["seed", "fold"])
    joined = pd.concat({"a": left["value"], "b": right["value"], "n_train": left["n_train"],
                        "n_test": left["n_test"]}, axis=1, join="inner").reset_index()
    joined["diff"] = joined["a"] - joined["b"]
    return effect(joined, bool(a["higher"].iloc[0]), alpha)


def compare_runs(run_a: str | Path, run_b: str | Path, models: tuple[str | None, str | None] = (None, None),
                 alpha: float = ALPHA) -> Comparison:
    """Compare model ``models[0]`` of ``run_a`` with ``models[1]`` of ``run_b`` per cell (module docstring).

    Raises:
        ReportError: A folder is not a run, a model is missing or ambiguous, or no cell can be compared.

    """
    ua, ub = units(load_runs([run_a]).records), units(load_runs([run_b]).records)
    ma, mb = _pick(ua, Path(run_a), models[0]), _pick(ub, Path(run_b), models[1])
    ua, ub = ua[ua["model"] == ma], ub[ub["model"] == mb]
    rows, refused = [], []
    for regime in order_regimes(set(ua["regime"]) & set(ub["regime"])):
        ra, rb = ua[ua["regime"] == regime], ub[ub["regime"] == regime]
        for task in order_tasks(set(ra["task"]) & set(rb["task"])):
            a, b = ra[ra["task"] == task], rb[rb["task"] == task]
            if _grid(a) != _grid(b):
                refused.append(f"{task} ({regime})")
                continue
            rows.append({"regime": regime, "task": task, "metric": str(a["metric"].iloc[0]), "model_a": ma,
                         "model_b": mb, **_cell(a, b, alpha)})
    if not rows:
        why = f"seeds or folds differ in every shared cell: {', '.join(refused)}" if refused else \
            "the runs share no task x regime cell"
        raise ReportError(f"nothing to compare between {run_a} ({ma}) and {run_b} ({mb}): {why}")
    table = pd.DataFrame(rows)
    table["p_bh"] = benjamini_hochberg(table["p"])
    sig = table["p_bh"] < alpha
    table["outcome"] = ["win" if s and g > 0 else ("loss" if s and g < 0 else "tie")
                        for s, g in zip(sig, table["gain"], strict=True)]
    table = table[COMPARE_COLUMNS]
    counts = table["outcome"].value_counts()
    summary = (f"{run_a}:{ma} vs {run_b}:{mb} over {len(table)} cells: {counts.get('win', 0)} wins, "
               f"{counts.get('tie', 0)} ties, {counts.get('loss', 0)} losses (corrected t, Benjamini-Hochberg "
               f"over the cells, alpha {alpha:g}); median MDD {table['mdd'].median():.3g}")
    return Comparison(table, refused, summary)


def refused_line(comparison: Comparison) -> str | None:
    """The one line naming the refused cells (None when none was)."""
    if not comparison.refused:
        return None
    return (f"refused {len(comparison.refused)} cells whose seeds or folds do not match: "
            f"{', '.join(comparison.refused)}")


def write_comparison(comparison: Comparison, output: Path) -> Path:
    """Write ``compare.csv`` (and ``compare.md``, the summary line and the table) atomically."""
    from ppgbench_pl.atomic_io import write_text_atomic
    from ppgbench_pl.report.tables import to_markdown

    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{output}: cannot create the output folder ({exc.strerror or exc})") from None
    path = output / "compare.csv"
    write_text_atomic(path, comparison.table.to_csv(index=False))
    refused = refused_line(comparison)
    text = [f"# {comparison.summary}", "", *( [refused, ""] if refused else []),
            to_markdown(comparison.table.round(4))]
    write_text_atomic(output / "compare.md", "\n".join(text) + "\n")
    return path


def compare(run_a: str | Path, run_b: str | Path, model_a: str | None = None, model_b: str | None = None,
            alpha: float = ALPHA, output_dir: str | Path | None = None) -> Comparison:
    """``pb.compare``: :func:`compare_runs` (``model_b`` defaults to ``model_a``), written if ``output_dir``.

    ``.table`` is the per-cell frame, ``.refused`` the cells with mismatched seeds or folds, ``.summary``
    the one-line summary.
    """
    result = compare_runs(run_a, run_b, (model_a, model_b if model_b is not None else model_a), alpha)
    if output_dir is not None:
        write_comparison(result, Path(output_dir))
    return result
