"""The main tables (CSV, Markdown, LaTeX): per regime, tasks x models, mean ± 95% CI per cell (protocol.md 10)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.report.compare import Rule, Scores, bold_models
from ppgbench_pl.report.findings import legend, mark
from ppgbench_pl.report.folder import MISSING
from ppgbench_pl.results.fold_entry import task_facts

METRIC_NAMES = {"mae": "MAE", "balanced_accuracy": "BA", "argmax_balanced_accuracy": "argmax BA"}
ROW_MARKERS = {"near_chance": "†", "undetermined": "?"}
CELL_COLUMNS = ["regime", "task", "metric", "model", "mean", "ci95", "n_seeds", "n_folds", "bold",
                "beats_baseline", "row_status", "baseline", "view", "grid", "flags", "code_versions",
                "backends", "unit", "budget", "pretraining_overlap", "deviations"]
FLAG_TEXT = {"s": "seeds/folds differ from the rest of the row (or between seeds)",
             "v": "made by more than one code version", "b": "made by more than one backend",
             "d": "not the published protocol (main_cells.csv column deviations)"}


def _distinct(values: pd.Series) -> list[str]:
    return sorted({str(v) if isinstance(v, str) else "" for v in values})


def cell_facts(scores: Scores, task: str, regime: str) -> dict[str, dict[str, str]]:
    """Per model of a cell: its grid (``S×F``), flags, code versions and backends."""
    runs = {s.model: scores.runs(task, regime, s.model) for s in scores.cell(task, regime)}
    pairs = {m: set(zip(part["seed"], part["fold"], strict=True)) for m, part in runs.items()}
    row = set().union(*(p for m, p in pairs.items() if not is_baseline(m))) if pairs else set()
    out = {}
    for model, part in runs.items():
        by_seed = part.groupby("seed")["fold"].agg(frozenset)  # ``S×F``: seeds x most folds of a seed
        grid = f"{len(by_seed)}×{max(map(len, by_seed), default=0)}"
        codes, backends = _distinct(part["code_version"]), [b for b in _distinct(part["backend"]) if b]
        flags = ("s" if by_seed.nunique() > 1 or (row and pairs[model] != row) else "") + \
                ("v" if len(codes) > 1 else "") + ("b" if len(backends) > 1 else "")
        out[model] = {"grid": grid, "flags": flags, "code_versions": ";".join(c or "unknown" for c in codes),
                      "backends": ";".join(backends), "view": str(part["view"].iloc[0]) if len(part) else ""}
    return out


def usual_grid(cells: pd.DataFrame, regime: str) -> str:
    """Return the most common ``S×F`` of a regime's cells (ties: the largest), stated in the caption."""
    grids = cells.loc[cells["regime"] == regime, "grid"]
    if grids.empty:
        return ""
    counts = grids.value_counts()
    best = counts[counts == counts.max()].index
    return max(best, key=lambda g: tuple(int(x) for x in g.split("×")))


#: The published random forest is cuML's (PROTOCOL.md 4.2, decision #25): a scikit-learn forest is labelled.
RF_SKLEARN = "sklearn (not the published cuML)"
#: ... except for the multi-output task, which the published protocol fits with scikit-learn as well.
RF_MULTI_OUTPUT = "sklearn (multi-output, as published)"


def backend_text(cells: pd.DataFrame, regime: str) -> str:
    """``sklearn`` or ``cuml (P), sklearn (prv)``: which backend made the table's numbers (RF: vs the published)."""
    from ppgbench_pl.data.registry import TASKS
    from ppgbench_pl.probes.backends import forest_backend_for

    part = cells[(cells["regime"] == regime) & ~cells["model"].map(is_baseline)]
    users: dict[str, list[str]] = {}
    for model, task, backends in zip(part["model"], part["task"], part["backends"], strict=True):
        spec = TASKS.get(task)
        # the published run's backend for this task: what cuML resolves to for its kind
        published = forest_backend_for(spec.kind, "cuml") if spec is not None else "cuml"
        for b in str(backends).split(";"):
            if b == "sklearn" and regime.split("_")[0] == "rf":
                b = RF_MULTI_OUTPUT if published == "sklearn" else RF_SKLEARN
            if b and model not in users.setdefault(b, []):
                users[b].append(model)
    if len(users) <= 1:
        return next(iter(users), "not recorded")
    return ", ".join(f"{b} ({', '.join(models)})" for b, models in sorted(users.items()))


def higher_is_better(task: str, metric: str) -> bool:
    """The direction of a task's metric (from its declaration; else any metric but MAE is higher-better)."""
    higher = task_facts(task)[2]
    return metric != "mae" if higher is None else higher


def metric_label(metric: str, task: str) -> str:
    """``MAE (bpm) ↓`` for a task with a unit (from its declaration), ``BA ↑`` without one."""
    unit = unit_of(task)
    text = METRIC_NAMES.get(metric, metric) + (f" ({unit})" if unit else "")
    return f"{text} {'↑' if higher_is_better(task, metric) else '↓'}"


def unit_of(task: str) -> str:
    """The unit of a task's reported metric ('' for classification and unknown tasks)."""
    return task_facts(task)[1]


def format_score(mean: float, ci95: float, metric: str) -> str:
    """``mean ± ci`` with the metric's digits (3 for accuracies, else 2); the mean alone when the CI is unknown."""
    d = 3 if "accuracy" in metric else 2
    return f"{mean:.{d}f}" if math.isnan(ci95) else f"{mean:.{d}f} ± {ci95:.{d}f}"


def cell_text(row: Any, usual: str, bold: Callable[[str], str]) -> str:
    """A ``main_cells`` row as a table shows it: the score (``bold`` markup), its ‡ § mark, ``[S×F flags]``."""
    text = format_score(row.mean, row.ci95, row.metric)
    text = (bold(text) if row.bold else text) + mark(row.pretraining_overlap)  # ‡ §: cards/overlap.py
    if row.grid != usual or row.flags:
        text += f" [{row.grid}{' ' + row.flags if row.flags else ''}]"
    return text


def main_cells(scores: Scores, rule: Rule, chance: pd.DataFrame) -> pd.DataFrame:
    """Long table of every (regime, task, model) score with its bold flag and baseline verdict."""
    status = {(r.regime, r.task): r.status for r in chance.itertuples()}
    info = scores.summary.set_index(["task", "regime", "model"])[["budget", "pretraining_overlap", "deviations"]]
    rows_of = info.fillna({"deviations": ""}).to_dict("index")
    rows = []
    for regime, task in scores.cells():
        bold = bold_models(scores, task, regime)
        facts = cell_facts(scores, task, regime)
        for s in scores.cell(task, regime):
            info = rows_of[(task, regime, s.model)]
            # the cell itself says it is off the protocol (the caption alone cannot say which cells are);
            # a constant baseline is made from the labels alone, which no listed setting or callback changes
            off = "" if is_baseline(s.model) else info["deviations"] or ""
            cell = {**facts[s.model], "flags": facts[s.model]["flags"] + ("d" if off else "")}
            base = None if is_baseline(s.model) else scores.baseline_of(task, regime, s.model)
            beats = None if is_baseline(s.model) else rule.beats(scores, task, regime, s.model, BASELINE_MODEL)
            rows.append({"regime": regime, "task": task, "metric": scores.metric[task], "model": s.model,
                         "mean": s.mean, "ci95": s.ci95, "n_seeds": s.n_seeds, "n_folds": s.n_folds,
                         "bold": s.model in bold, "beats_baseline": beats,
                         "row_status": status.get((regime, task), ""), "baseline": base or "", **cell,
                         "unit": unit_of(task), "budget": info["budget"] or "published",
                         "pretraining_overlap": info["pretraining_overlap"] or "none", "deviations": off})
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def wide_table(cells: pd.DataFrame, regime: str, models: list[str], tasks: list[str],
               bold: Callable[[str], str]) -> pd.DataFrame:
    """Tasks x models text table of one regime; ``bold`` gives the output format's markup."""
    part = cells[cells["regime"] == regime]
    usual = usual_grid(cells, regime)
    rows = []
    for task in tasks:
        if by_model := {r.model: r for r in part[part["task"] == task].itertuples()}:
            first = next(iter(by_model.values()))
            marker = f" {ROW_MARKERS[first.row_status]}" if first.row_status in ROW_MARKERS else ""
            rows.append({"task": task + marker, "metric": metric_label(first.metric, task),
                         **{m: cell_text(by_model[m], usual, bold) if m in by_model else MISSING for m in models}})
    return pd.DataFrame(rows, columns=["task", "metric", *models])


def to_markdown(frame: pd.DataFrame) -> str:
    """Render a GitHub-flavoured Markdown table (pipes in cells escaped)."""
    def line(values: Iterable[object]) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    rows = [frame.columns, ["---"] * len(frame.columns), *frame.itertuples(index=False)]
    return "\n".join(map(line, rows)) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}",
                  "|": r"\textbar{}", "<": r"\textless{}", ">": r"\textgreater{}"}
_LATEX_SYMBOLS = {"±": r"$\pm$", "×": r"$\times$", "–": "--", "↓": r"$\downarrow$", "↑": r"$\uparrow$",
                  "†": r"$^\dagger$", "‡": r"$^\ddagger$", "§": r"\S{}"}


def latex_escape(text: str) -> str:
    """Escape LaTeX specials and spell the table's symbols as LaTeX."""
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    for symbol, latex in _LATEX_SYMBOLS.items():
        out = out.replace(symbol, latex)
    return out


def to_latex(frame: pd.DataFrame, caption: str) -> str:
    """Write a booktabs ``tabular`` in a ``table`` float; cells are escaped, bold kept as textbf."""
    def cell(value: object) -> str:
        text = str(value)
        if text.startswith("**") and "**" in text[2:]:
            inner, _, rest = text[2:].partition("**")
            return r"\textbf{" + latex_escape(inner) + "}" + latex_escape(rest)
        return latex_escape(text)

    lines = ["% needs \\usepackage{booktabs}", "\\begin{table}[t]", "\\centering", "\\small",
             f"\\caption{{{latex_escape(caption)}}}", "\\begin{tabular}{ll" + "c" * (len(frame.columns) - 2) + "}",
             "\\toprule", " & ".join(latex_escape(str(c)) for c in frame.columns) + r" \\", "\\midrule",
             *[" & ".join(cell(v) for v in row) + r" \\" for row in frame.itertuples(index=False)],
             "\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def caption(regime: str, rule: Rule, ci_unit: str, cells: pd.DataFrame) -> str:
    """Write the caption: the table's rules and what the table is made of."""
    text = (f"{regime}: mean ± Student-t 95% CI over {ci_unit}s. Bold: best mean and every model whose CI "
            f"overlaps it. † no model meaningfully better than its constant baseline ({rule.text}); "
            f"? not decidable; {MISSING} not run.")
    part = cells[cells["regime"] == regime]
    if part.empty:
        return text
    text = budget_note(part) + deviation_note(part) + text
    seeds, folds = usual_grid(cells, regime).split("×")
    text += (f" Each cell: {seeds} seed{'s' * (seeds != '1')} × {folds} fold{'s' * (folds != '1')} unless "
             "marked [seeds×folds]. Flags: " + "; ".join(f"{k} {v}" for k, v in FLAG_TEXT.items())
             + f". Backend: {backend_text(cells, regime)}.")
    text += legend(part["pretraining_overlap"], part.loc[part["pretraining_overlap"] == "unknown", "model"])
    if part["model"].map(is_baseline).sum() > part["task"].nunique():
        text += (" Several constant columns: one baseline per task view (encoder rate); each model is "
                 "compared with its own (main_cells.csv column baseline).")
    return text


def budget_note(cells: pd.DataFrame) -> str:
    """``SMOKE BUDGET ...`` before a caption whose cells were not made by the published protocol."""
    names = sorted({n for b in cells.get("budget", pd.Series(dtype=str)).dropna() for n in str(b).split(";")}
                   - {"published", ""})  # a cell made under several budgets joins them with ';'
    if not names:
        return ""
    return (f"{' + '.join(n.upper() for n in names)} BUDGET: not the published protocol (fewer seeds, folds, "
            "subjects, windows or trials); do not compare with published numbers. ")


def deviation_note(cells: pd.DataFrame) -> str:
    """``NOT THE PUBLISHED PROTOCOL: refit=True ...`` before a caption whose cells ran with a switched setting."""
    found = {d for joined in cells.get("deviations", pd.Series(dtype=str)).dropna()
             for d in str(joined).split(";") if d}
    if not found:
        return ""
    return f"NOT THE PUBLISHED PROTOCOL: {', '.join(sorted(found))} (main_cells.csv column deviations). "


def write_main_tables(cells: pd.DataFrame, scores: Scores, rule: Rule, out_dir: Path) -> list[Path]:
    """Write ``main_<regime>.csv/.md/.tex`` and ``main_cells.csv``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "main_cells.csv"]
    cells.to_csv(paths[0], index=False)
    for regime in scores.regimes:
        args = (cells, regime, scores.models, scores.tasks(regime))
        text, stem = caption(regime, rule, scores.ci_unit, cells), f"main_{safe_stem(regime)}"
        wide_table(*args, bold=lambda t: f"{t} *").to_csv(out_dir / f"{stem}.csv", index=False)
        md = wide_table(*args, bold=lambda t: f"**{t}**")
        (out_dir / f"{stem}.md").write_text(f"{text}\n\n{to_markdown(md)}", encoding="utf-8")
        (out_dir / f"{stem}.tex").write_text(to_latex(md, text), encoding="utf-8")
        paths += [out_dir / f"{stem}{suffix}" for suffix in (".csv", ".md", ".tex")]
    return paths


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def safe_stem(name: str) -> str:
    """A file-name part for ``name``: itself when plain, else its safe characters and an 8-hex digest."""
    if _PLAIN.fullmatch(name) and ".." not in name:
        return name
    kept = _UNSAFE.sub("_", name).strip("_")[:40] or "name"
    return f"{kept}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
