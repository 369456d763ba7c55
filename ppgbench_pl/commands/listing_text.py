"""The text tables and blocks ``ppgbench list`` prints (the rows come from :mod:`.listing`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ppgbench_pl.cards.rows import pretraining_block


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and value >= 10_000:
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value) or "-"
    return str(value)


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], max_width: int = 60) -> str:
    """Aligned columns; long cells are cut to ``max_width`` with an ellipsis (JSON has them whole)."""
    cells = [[_cell(r.get(key)) for key, _ in columns] for r in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 3] + "..." for c in row] for row in cells]
    heads = [head for _, head in columns]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "datasets": [("key", "dataset"), ("display_name", "folder"), ("native_fs", "native Hz"),
                 ("window_s", "window s"), ("stride_s", "stride s"), ("group", "group"),
                 ("subjects", "subjects"), ("n_tasks", "tasks"), ("access", "access"),
                 ("derived_from", "derived from"), ("paper_cite", "paper"), ("source", "source")],
    "tasks": [("name", "task"), ("kind", "type"), ("level", "level"), ("tier", "tier"),
              ("metric", "metric"), ("unit", "unit"), ("n_classes", "n"), ("classes", "classes")],
    "encoders": [("name", "encoder"), ("role", "role"), ("native_fs", "native Hz"),
                 ("embedding_dim", "embedding"), ("parameters", "parameters"),
                 ("checkpoint_required", "checkpoint"), ("paper_cite", "paper"), ("class_path", "class")],
    "controls": [("name", "control"), ("what", "what it is"), ("how", "how to run it")],
    "regimes": [("name", "regime"), ("tiers", "tiers"), ("trains", "trains"),
                ("budget_text", "default budget")],
}
_OVERVIEW_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "datasets": [("key", "dataset"), ("native_fs", "native Hz"), ("window_s", "window s"),
                 ("n_tasks", "tasks"), ("access", "access")],
    "tasks": [("name", "task"), ("kind", "type"), ("level", "level"), ("tier", "tier")],
    "encoders": [("name", "encoder"), ("role", "role"), ("native_fs", "native Hz"),
                 ("embedding_dim", "embedding"), ("parameters", "parameters"),
                 ("checkpoint_required", "checkpoint")],
    "controls": [("name", "control"), ("what", "what it is")],
    "regimes": [("name", "regime"), ("tiers", "tiers"), ("budget_short", "default budget")],
}


def _task_counts(rows: Sequence[Mapping[str, Any]]) -> str:
    real = [r for r in rows if r["dataset"] != "synthetic"]
    primary = sum(r["tier"] == "primary" for r in real)
    synthetic = len(rows) - len(real)
    return (f"{len(real)} benchmark tasks ({primary} primary, {len(real) - primary} secondary)"
            + (f" + {synthetic} synthetic" if synthetic else ""))


def _blocks(rows: Sequence[Mapping[str, Any]], title: str, fields: Sequence[tuple[str, str]]) -> str:
    """One block per row: a title line, then ``label: value`` lines (for rows with long prose)."""
    width = max(len(label) for _, label in fields)
    out = []
    for r in rows:
        out.append("  " + title.format(**{k: _cell(v) for k, v in r.items()}))
        out += [f"      {label + ':':<{width + 1}} {_cell(r.get(key))}" for key, label in fields
                if r.get(key) not in (None, "", [])]
    return "\n".join(out)


_BLOCKS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "regimes": ("{name}  ({tiers}; {class_path})",
                [("trains", "trains"), ("selection", "selects"), ("budget_text", "budget")]),
    "controls": ("{name}", [("what", "what"), ("how", "run"), ("class_path", "class")]),
}


def render(what: str, rows: list[dict[str, Any]], overview: bool) -> str:
    """One table as text: the overview's short form, or every column."""
    if not rows:
        return f"{what}: none match"
    if not overview and what in _BLOCKS:
        title, fields = _BLOCKS[what]
        return f"{what}:\n" + _blocks(rows, title, fields)
    columns = (_OVERVIEW_COLUMNS if overview else _COLUMNS)[what]
    text = f"{what}:\n" + "\n".join("  " + line for line in _table(rows, columns).splitlines())
    if what == "tasks":
        text += "\n  " + _task_counts(rows)
    if what == "encoders" and not overview:  # where the weights come from, whole
        width = max(len(r["name"]) for r in rows)
        lines = [f"  {r['name']:<{width}}  {r['weights']}" + (f" ({r['weights_url']})" if r.get("weights_url")
                                                               else "") for r in rows]
        text += "\n\nweights:\n" + "\n".join(lines) + "\n\n" + pretraining_block(rows)
    return text
