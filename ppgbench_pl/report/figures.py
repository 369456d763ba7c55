"""Figures as PNG (for the page) and SVG (for papers): the regime comparison and the CD diagrams.

Built on :class:`matplotlib.figure.Figure`, never ``pyplot``: no GUI backend or global state.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report.compare import Ranking
from ppgbench_pl.report.scores import Scores
from ppgbench_pl.report.tables import metric_label

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn (the report command starts fast)
    from matplotlib.figure import Figure

FORMATS = ("png", "svg")


def save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg`` reproducibly (no timestamps, fixed SVG ids)."""
    from matplotlib import rc_context

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with rc_context({"svg.hashsalt": "ppgbench", "svg.fonttype": "path"}):
        for fmt in FORMATS:
            path = out_dir / f"{stem}.{fmt}"
            meta = {"Date": None} if fmt == "svg" else {"Software": None}
            fig.savefig(path, format=fmt, dpi=150, bbox_inches="tight", metadata=meta)
            paths.append(path)
    return paths


def _colours(models: list[str]) -> dict[str, str]:
    palette = [f"C{i}" for i in range(10)]
    others = [m for m in models if not is_baseline(m)]
    out = {m: palette[i % len(palette)] for i, m in enumerate(others)}
    greys = ("0.35", "0.55", "0.7", "0.2")
    out.update({m: greys[i % len(greys)] for i, m in enumerate(m for m in models if is_baseline(m))})
    return out


def regime_comparison(scores: Scores) -> Figure:
    """Figure 1: one panel per task; each model's mean ± CI under every regime present."""
    from matplotlib.figure import Figure

    regimes, tasks, models = scores.regimes, scores.tasks(), scores.models
    ncols = min(4, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    fig = Figure(figsize=(3.3 * ncols, 2.7 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    colours = _colours(models)
    offsets = np.linspace(-0.25, 0.25, len(models)) if len(models) > 1 else np.zeros(1)
    for ax, task in zip(axes.ravel(), tasks, strict=False):
        for offset, model in zip(offsets, models, strict=True):
            xs, ys, es = [], [], []
            for x, regime in enumerate(regimes):
                s = scores.get(task, regime, model)
                if s is not None:
                    xs.append(x + offset)
                    ys.append(s.mean)
                    es.append(s.half_width)
            if xs:
                style = "--" if is_baseline(model) else "-"
                ax.errorbar(xs, ys, yerr=es, fmt="o", ls=style if len(xs) > 1 else "none", ms=4, capsize=2,
                            color=colours[model], label=model, lw=1)
        ax.set_title(task, fontsize=9)
        ax.set_xticks(range(len(regimes)), regimes, fontsize=8)
        ax.set_xlim(-0.6, len(regimes) - 0.4)
        ax.set_ylabel(metric_label(scores.metric.get(task, ""), task), fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.ravel()[len(tasks):]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), fontsize=8,
               frameon=False)
    return fig


def cliques(ranks: list[float], cd: float) -> list[tuple[int, int]]:
    """Maximal runs (i, j) of rank-sorted models whose average ranks differ by at most the CD."""
    out: list[tuple[int, int]] = []
    for i in range(len(ranks)):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] - ranks[i] <= cd:
            j += 1
        if j > i and not any(a <= i and j <= b for a, b in out):
            out.append((i, j))
    return out


def cd_diagram(ranking: Ranking) -> Figure:
    """Draw a CD diagram: average ranks (1 = best), the CD bar, models that do not differ joined."""
    from matplotlib.figure import Figure

    names = list(ranking.average_ranks.index)
    ranks = [float(r) for r in ranking.average_ranks.to_numpy()]
    k = len(names)
    half = math.ceil(k / 2)
    fig = Figure(figsize=(7.0, 1.4 + 0.3 * half), layout="constrained")
    ax = fig.subplots()
    ax.set_xlim(0.9, k + 0.1)
    ax.set_ylim(-(0.6 + 0.3 * half), 0.75)
    ax.axis("off")
    ax.hlines(0.0, 1, k, color="k", lw=1)
    for t in range(1, k + 1):
        ax.vlines(t, 0.0, 0.08, color="k", lw=1)
        ax.text(t, 0.12, str(t), ha="center", va="bottom", fontsize=8)
    cd = ranking.critical_difference
    if cd <= k - 1:
        ax.hlines(0.55, 1, 1 + cd, color="k", lw=1.5)
        ax.vlines([1, 1 + cd], 0.5, 0.6, color="k", lw=1.5)
        ax.text(1 + cd / 2, 0.62, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    for i, (name, rank) in enumerate(zip(names, ranks, strict=True)):
        left = i < half
        y = -(0.45 + 0.3 * (i if left else k - 1 - i))
        x_end = 0.95 if left else k + 0.05
        ax.plot([rank, rank, x_end], [0.0, y, y], color="k", lw=0.8)
        ax.text(x_end - 0.03 if left else x_end + 0.03, y, f"{name} ({rank:.2f})",
                ha="right" if left else "left", va="center", fontsize=8)
    for n, (i, j) in enumerate(cliques(ranks, cd)):
        y = -0.12 - 0.08 * n
        ax.hlines(y, ranks[i] - 0.03, ranks[j] + 0.03, color="k", lw=3)
    p = ranking.friedman_pvalue
    ptext = "n/a (< 3 models)" if math.isnan(p) else f"{p:.3g}"
    ax.set_title(f"{ranking.regime}: average rank over {ranking.n_tasks} tasks; Friedman p = {ptext}",
                 fontsize=9)
    return fig
