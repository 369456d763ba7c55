"""``ppgbench list [datasets|tasks|...]`` (text or JSON) and ``ppgbench cite``, from static torch-free tables."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ppgbench_pl.cards.rows import dataset_card_row, model_card_rows, pretraining_block
from ppgbench_pl.data.registry import DECLARATIONS, get_dataset, select_tasks
from ppgbench_pl.encoders.catalog import CATALOG
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.messages import did_you_mean

TABLES = ("datasets", "tasks", "encoders", "controls", "regimes")
#: Which filters each table takes.
FILTERS: dict[str, tuple[str, ...]] = {
    "datasets": ("dataset",),
    "tasks": ("dataset", "tier", "kind"),
    "encoders": (),
    "controls": (),
    "regimes": ("tier",),
}

#: The one control that is not an encoder (PROTOCOL.md 5.1); the others are the catalog's ``control`` role.
CONSTANT_CONTROL: dict[str, Any] = {
    "name": "constant", "class_path": None,
    "what": "constant baseline (the protocol's TrainMean): the majority training class or the training mean, "
            "from training labels only",
    "how": "scored in every job automatically; no config needed",
}


def _plain(value: Any) -> Any:
    """JSON-ready values: dataclasses and mappings become dicts, tuples lists."""
    return json.loads(json.dumps(value, default=dataclasses.asdict))


#: The columns of ``list datasets`` and ``list tasks`` in order: the declaration's fields, else derived per row.
DATASET_FIELDS = ("key", "display_name", "native_fs", "window_s", "stride_s", "group", "subjects", "n_tasks",
                  "tasks", "source", "page", "publisher", "access", "license", "downloadable", "description")
TASK_FIELDS = ("name", "dataset", "target", "kind", "level", "tier", "metric", "higher_is_better", "classes",
               "n_classes", "n_targets", "unit", "regimes", "description")


def _row(obj: Any, fields: Sequence[str], derived: Mapping[str, Any]) -> dict[str, Any]:
    return {f: derived[f] if f in derived else getattr(obj, f) for f in fields}


def dataset_rows(dataset: str | None = None) -> list[dict[str, Any]]:
    """One row per declared dataset (or only ``dataset``)."""
    keys = [get_dataset(dataset).key] if dataset is not None else list(DECLARATIONS)
    rows = []
    for key in keys:
        decl = DECLARATIONS[key]
        source = decl.source
        derived = {"key": key, "n_tasks": len(decl.tasks), "tasks": [t.name for t in decl.tasks],
                   "page": source.page if source is not None else None,
                   "publisher": source.publisher if source is not None else "built in",
                   "downloadable": source is not None}
        # paper, publisher, licence as found, derived_from (cards/rows.py)
        rows.append({**_row(decl.info, DATASET_FIELDS, derived), **dataset_card_row(key)})
    return rows


def task_rows(
    dataset: str | None = None, tier: str | None = None, kind: str | None = None
) -> list[dict[str, Any]]:
    """One row per task in registry order, filtered."""
    from ppgbench_pl.regimes.catalog import REGIMES

    return [_row(t, TASK_FIELDS, {
        "classes": list(t.classes),
        "n_classes": len(t.classes) if t.kind == "classification" and t.classes else None,
        "regimes": [r.name for r in REGIMES.values() if t.tier in r.tiers and r.name != "linear_frac"]})
        for t in select_tasks(dataset, tier, kind)]


def encoder_rows() -> list[dict[str, Any]]:
    """One row per encoder of the catalog: rate, embedding size, parameters, weights, checkpoint, role."""
    cards = model_card_rows()  # the model card of each entry: pretraining data, paper, licences
    return [{**_plain(entry), **cards.get(name, {})} for name, entry in CATALOG.items()]


def control_rows() -> list[dict[str, Any]]:
    """The controls (PROTOCOL.md section 5): the constant baseline, then the catalog's control encoders."""
    rows = [dict(CONSTANT_CONTROL)]
    for entry in CATALOG.values():
        if entry.role == "control":
            how = "list under controls: (class_path)" + (" with its checkpoint" if entry.checkpoint_required else "")
            rows.append({"name": entry.name, "class_path": entry.class_path, "what": entry.description,
                         "how": how})
    return rows


def regime_rows(tier: str | None = None) -> list[dict[str, Any]]:
    """One row per regime, with its default search budget (optionally only those running on ``tier``)."""
    from ppgbench_pl.regimes.catalog import REGIMES

    if tier is not None:
        select_tasks(tier=tier)  # validates the tier with a one-line error
    fields = ("name", "class_path", "trains", "tiers", "uses_embeddings", "selection", "budget", "budget_text",
              "budget_short")
    return [_row(r, fields, {"tiers": list(r.tiers), "budget": _plain(r.budget), "budget_text": r.budget_text(),
                             "budget_short": r.budget_short()})
            for r in REGIMES.values() if tier is None or tier in r.tiers]


def catalog_tables(
    *, dataset: str | None = None, tier: str | None = None, kind: str | None = None,
    tables: Sequence[str] = TABLES,
) -> dict[str, list[dict[str, Any]]]:
    """Every table ``ppgbench list`` shows, as lists of plain (JSON-ready) dicts, filtered where it fits."""
    build = {
        "datasets": lambda: dataset_rows(dataset),
        "tasks": lambda: task_rows(dataset, tier, kind),
        "encoders": encoder_rows,
        "controls": control_rows,
        "regimes": lambda: regime_rows(tier),
    }
    return {name: build[name]() for name in tables}


def run_list(
    what: str | None = None, *, dataset: str | None = None, tier: str | None = None, kind: str | None = None,
    as_json: bool = False,
) -> str:
    """The text (or JSON) ``ppgbench list [what]`` prints: one of :data:`TABLES` in full, or the overview (None).

    Raises:
        ConfigError: An unknown table, dataset, tier or kind, or a filter that does not apply to ``what``.
    """
    filters = {"dataset": dataset, "tier": tier, "kind": kind}
    if what is not None and what not in TABLES:
        raise ConfigError(f"cannot list '{what}': choose from {', '.join(TABLES)}{did_you_mean(what, TABLES)}")
    for name, value in filters.items():
        if what is not None and value is not None and name not in FILTERS[what]:
            takes = ", ".join(f"--{f}" for f in FILTERS[what]) or "no filters"
            raise ConfigError(f"--{name} does not filter {what} ({what} takes {takes})")
    names: tuple[str, ...] = (what,) if what is not None else tuple(
        # the overview shows only the tables every given filter applies to
        n for n in TABLES if all(v is None or k in FILTERS[n] for k, v in filters.items()))
    tables = catalog_tables(dataset=dataset, tier=tier, kind=kind, tables=names)
    if what is not None:
        return json.dumps(tables[what], indent=2) if as_json else render(what, tables[what], overview=False)
    if as_json:
        return json.dumps(tables, indent=2)
    parts = [render(n, tables[n], overview=True) for n in names]
    parts.append("details: ppgbench list datasets|tasks|encoders|controls|regimes "
                 "[--dataset KEY] [--tier TIER] [--kind KIND] [--json]")
    return "\n\n".join(parts)


def add_list_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``list``."""
    parser = sub.add_parser(
        "list", description="Everything that can be run. Without a table name: an overview of all of them.")
    # No argparse ``choices``: run_list answers a typo with a did-you-mean.
    parser.add_argument("what", nargs="?", metavar="{" + ",".join(TABLES) + "}",
                        help="the table to show in full")
    parser.add_argument("--dataset", help="only this dataset's tasks (datasets, tasks)")
    parser.add_argument("--tier", choices=("primary", "secondary"), help="only this tier (tasks, regimes)")
    parser.add_argument("--kind", choices=("regression", "classification", "regression_cls"),
                        help="only this task type (tasks)")
    parser.add_argument("--json", dest="as_json", action="store_true", help="JSON on stdout, for scripts")
    parser.set_defaults(func=lambda ns: print(run_list(ns.what, dataset=ns.dataset, tier=ns.tier, kind=ns.kind,
                                                       as_json=ns.as_json)))


def add_cite_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``cite``."""
    parser = sub.add_parser(
        "cite", description="BibTeX of ppgbench and of the named datasets and encoders (from their cards).")
    parser.add_argument("--datasets", nargs="*", default=[], metavar="KEY",
                        help="dataset keys (ppgbench list datasets), or all")
    parser.add_argument("--models", nargs="*", default=[], metavar="NAME",
                        help="encoder names (ppgbench list encoders), or all")
    parser.set_defaults(func=lambda ns: print(cite_text(ns.datasets, ns.models), end=""))


def cite_text(datasets: list[str], models: list[str]) -> str:
    """The BibTeX ``ppgbench cite`` prints (``all``: every card); an unknown name is a one-line ConfigError."""
    from ppgbench_pl.cards.bibtex import render_all
    from ppgbench_pl.cards.citations import check_names, references
    from ppgbench_pl.data.registry import CARDS
    from ppgbench_pl.encoders.cards import MODEL_CARDS

    datasets = list(CARDS) if datasets == ["all"] else datasets
    models = list(MODEL_CARDS) if models == ["all"] else models
    check_names(datasets, models)
    return render_all(references(datasets, models))


# -- the text -----------------------------------------------------------------------------------------------
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


#: The columns of each table (regimes and controls print in full as blocks: only the overview uses theirs).
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
    "controls": [("name", "control"), ("what", "what it is")],
    "regimes": [("name", "regime"), ("tiers", "tiers"), ("budget_short", "default budget")],
}
#: The overview's columns of the long tables.
_OVERVIEW: dict[str, tuple[str, ...]] = {
    "datasets": ("key", "native_fs", "window_s", "n_tasks", "access"),
    "tasks": ("name", "kind", "level", "tier"),
    "encoders": ("name", "role", "native_fs", "embedding_dim", "parameters", "checkpoint_required"),
}


def _task_counts(rows: Sequence[Mapping[str, Any]]) -> str:
    real = [r for r in rows if r["dataset"] != "synthetic"]
    primary = sum(r["tier"] == "primary" for r in real)
    synthetic = len(rows) - len(real)
    return (f"{len(real)} benchmark tasks ({primary} primary, {len(real) - primary} secondary)"
            + (f" + {synthetic} synthetic" if synthetic else ""))


#: The tables printed in full as one block per row (a title line, then ``label: value`` lines of long prose).
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
        width = max(len(label) for _, label in fields)
        out = [f"{what}:"]
        for r in rows:
            out.append("  " + title.format(**{k: _cell(v) for k, v in r.items()}))
            out += [f"      {label + ':':<{width + 1}} {_cell(r.get(key))}" for key, label in fields
                    if r.get(key) not in (None, "", [])]
        return "\n".join(out)
    columns = [c for c in _COLUMNS[what] if not overview or c[0] in _OVERVIEW.get(what, (c[0],))]
    text = f"{what}:\n" + "\n".join("  " + line for line in _table(rows, columns).splitlines())
    if what == "tasks":
        text += "\n  " + _task_counts(rows)
    if what == "encoders" and not overview:  # where the weights come from, whole
        width = max(len(r["name"]) for r in rows)
        lines = [f"  {r['name']:<{width}}  {r['weights']}" + (f" ({r['weights_url']})" if r.get("weights_url")
                                                               else "") for r in rows]
        text += "\n\nweights:\n" + "\n".join(lines) + "\n\n" + pretraining_block(rows)
    return text
