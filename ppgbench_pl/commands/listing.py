"""``ppgbench list``: everything that can be run, as text for people or JSON for scripts.

``ppgbench list`` gives an overview; ``ppgbench list datasets|tasks|encoders|controls|regimes`` one table
in full; ``--dataset``, ``--tier`` and ``--kind`` filter (``ppgbench list tasks --dataset dalia``);
``--json`` prints the same rows as JSON (a list of objects for one table, an object of tables for the
overview). Everything comes from static, torch-free tables: the dataset registry
(:mod:`ppgbench_pl.data.registry`), the encoder catalog (:mod:`ppgbench_pl.encoders.catalog`) and the
regime catalog (:mod:`ppgbench_pl.regimes.catalog`), so the command starts in well under a second.
:func:`catalog_tables` gives the rows to Python (the API wraps them into DataFrames).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ppgbench_pl.cards.rows import dataset_card_row, model_card_rows
from ppgbench_pl.commands.listing_text import render
from ppgbench_pl.data.registry import DECLARATIONS, get_dataset, select_tasks
from ppgbench_pl.errors import ConfigError

TABLES = ("datasets", "tasks", "encoders", "controls", "regimes")
#: Which filters each table takes.
FILTERS: dict[str, tuple[str, ...]] = {
    "datasets": ("dataset",),
    "tasks": ("dataset", "tier", "kind"),
    "encoders": (),
    "controls": (),
    "regimes": ("tier",),
}
ENCODER_CATALOG = "ppgbench_pl.encoders.catalog"

#: The one control that is not an encoder (PROTOCOL.md 5.1); the others are the catalog's ``control`` role.
CONSTANT_CONTROL: dict[str, Any] = {
    "name": "constant", "class_path": None,
    "what": "constant baseline (the protocol's TrainMean): the majority training class or the training mean, "
            "from training labels only",
    "how": "scored in every job automatically; no config needed",
}


def _plain(value: Any) -> Any:
    """JSON-ready values: tuples become lists, nested mappings and dataclasses become dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def dataset_rows(dataset: str | None = None) -> list[dict[str, Any]]:
    """One row per declared dataset (or only ``dataset``)."""
    keys = [get_dataset(dataset).key] if dataset is not None else list(DECLARATIONS)
    rows = []
    for key in keys:
        decl = DECLARATIONS[key]
        info, source = decl.info, decl.source
        rows.append({
            "key": key,
            "display_name": info.display_name,
            "native_fs": info.native_fs,
            "window_s": info.window_s,
            "stride_s": info.stride_s,
            "group": info.group,
            "subjects": info.subjects,
            "n_tasks": len(decl.tasks),
            "tasks": [t.name for t in decl.tasks],
            "source": info.source,
            "page": source.page if source is not None else None,
            "publisher": source.publisher if source is not None else "built in",
            "access": info.access,
            "license": info.license,
            "downloadable": source is not None,
            "description": info.description,
            **dataset_card_row(key),  # paper, publisher, licence as found, derived_from (cards/rows.py)
        })
    return rows


def _regimes_for(tier: str) -> list[str]:
    from ppgbench_pl.regimes.catalog import REGIMES

    return [r.name for r in REGIMES.values() if tier in r.tiers and r.name != "linear_frac"]


def task_rows(
    dataset: str | None = None, tier: str | None = None, kind: str | None = None
) -> list[dict[str, Any]]:
    """One row per task in registry order, filtered."""
    return [
        {
            "name": t.name,
            "dataset": t.dataset,
            "target": t.target,
            "kind": t.kind,
            "level": t.level,
            "tier": t.tier,
            "metric": t.metric,
            "higher_is_better": t.higher_is_better,
            "classes": list(t.classes),
            "n_classes": len(t.classes) if t.kind == "classification" and t.classes else None,
            "n_targets": t.n_targets,
            "unit": t.unit,
            "regimes": _regimes_for(t.tier),
            "description": t.description,
        }
        for t in select_tasks(dataset, tier, kind)
    ]


def _encoder_catalog() -> Any:
    """The torch-free encoder catalog (:data:`ppgbench_pl.encoders.catalog.CATALOG`).

    Raises:
        ConfigError: The catalog is missing (it is what ``list encoders`` reads).
    """
    try:
        return importlib.import_module(ENCODER_CATALOG).CATALOG
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"the encoder catalog ({ENCODER_CATALOG}) is not available: {exc}") from None


def encoder_rows() -> list[dict[str, Any]]:
    """One row per encoder of the catalog: rate, embedding size, parameters, weights, checkpoint, role."""
    cards = model_card_rows()  # the model card of each entry: pretraining data, paper, licences
    return [{**_plain(entry), **cards.get(name, {})} for name, entry in _encoder_catalog().items()]


def control_rows() -> list[dict[str, Any]]:
    """The controls (PROTOCOL.md section 5): the constant baseline, then the catalog's control encoders."""
    rows = [dict(CONSTANT_CONTROL)]
    for entry in _encoder_catalog().values():
        if entry.role == "control":
            how = "list under controls: (class_path)"
            if entry.checkpoint_required:
                how += " with its checkpoint"
            rows.append({"name": entry.name, "class_path": entry.class_path, "what": entry.description,
                         "how": how})
    return rows


def regime_rows(tier: str | None = None) -> list[dict[str, Any]]:
    """One row per regime, with its default search budget (optionally only those running on ``tier``)."""
    from ppgbench_pl.regimes.catalog import REGIMES

    if tier is not None:
        select_tasks(tier=tier)  # validates the tier with a one-line error
    return [
        {
            "name": r.name,
            "class_path": r.class_path,
            "trains": r.trains,
            "tiers": list(r.tiers),
            "uses_embeddings": r.uses_embeddings,
            "selection": r.selection,
            "budget": _plain(r.budget),
            "budget_text": r.budget_text(),
            "budget_short": r.budget_short(),
        }
        for r in REGIMES.values()
        if tier is None or tier in r.tiers
    ]


def _check_filters(what: str | None, filters: Mapping[str, str | None]) -> None:
    if what is not None and what not in TABLES:
        import difflib

        close = difflib.get_close_matches(what, TABLES, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"cannot list '{what}': choose from {', '.join(TABLES)}{hint}")
    if what is None:
        return
    for name, value in filters.items():
        if value is not None and name not in FILTERS[what]:
            takes = ", ".join(f"--{f}" for f in FILTERS[what]) or "no filters"
            raise ConfigError(f"--{name} does not filter {what} ({what} takes {takes})")


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
    """The text (or JSON) ``ppgbench list [what]`` prints.

    Args:
        what: One of :data:`TABLES`, or None for the overview of all of them.
        dataset: Only this dataset (datasets, tasks).
        tier: Only ``primary`` or ``secondary`` (tasks; regimes that run on that tier).
        kind: Only ``regression``, ``classification`` or ``regression_cls`` tasks.
        as_json: JSON instead of text: a list of rows for one table, an object of tables for the overview.

    Raises:
        ConfigError: An unknown table, dataset, tier or kind, or a filter that does not apply to ``what``.
    """
    filters = {"dataset": dataset, "tier": tier, "kind": kind}
    _check_filters(what, filters)
    names: tuple[str, ...] = (what,) if what is not None else tuple(
        # the overview shows only the tables every given filter applies to
        n for n in TABLES if all(v is None or k in FILTERS[n] for k, v in filters.items()))
    if what is not None:
        rows = catalog_tables(dataset=dataset, tier=tier, kind=kind, tables=names)[what]
        return json.dumps(rows, indent=2) if as_json else render(what, rows, overview=False)
    # The overview shows what it can: a table that cannot be built (e.g. no encoder catalog) is a note.
    tables: dict[str, list[dict[str, Any]]] = {}
    problems: dict[str, str] = {}
    for name in names:
        try:
            tables.update(catalog_tables(dataset=dataset, tier=tier, kind=kind, tables=(name,)))
        except ConfigError as exc:
            if name in ("datasets", "tasks"):  # a bad filter, not a missing table
                raise
            problems[name] = str(exc)
    if as_json:
        return json.dumps({**tables, **({"unavailable": problems} if problems else {})}, indent=2)
    parts = [render(n, tables[n], overview=True) if n in tables else f"{n}: unavailable ({problems[n]})"
             for n in names]
    parts.append("details: ppgbench list datasets|tasks|encoders|controls|regimes "
                 "[--dataset KEY] [--tier TIER] [--kind KIND] [--json]")
    return "\n\n".join(parts)


def add_list_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``list``."""
    parser = sub.add_parser(
        "list", help="List datasets, tasks, encoders, controls and regimes that can be run.",
        description="Everything that can be run. Without a table name: an overview of all of them.")
    # No argparse ``choices``: run_list answers a typo with a did-you-mean.
    parser.add_argument("what", nargs="?", metavar="{" + ",".join(TABLES) + "}",
                        help="the table to show in full")
    parser.add_argument("--dataset", help="only this dataset's tasks (datasets, tasks)")
    parser.add_argument("--tier", choices=("primary", "secondary"), help="only this tier (tasks, regimes)")
    parser.add_argument("--kind", choices=("regression", "classification", "regression_cls"),
                        help="only this task type (tasks)")
    parser.add_argument("--json", dest="as_json", action="store_true", help="JSON on stdout, for scripts")
    parser.set_defaults(func=_command)


def _command(ns: argparse.Namespace) -> None:
    print(run_list(ns.what, dataset=ns.dataset, tier=ns.tier, kind=ns.kind, as_json=ns.as_json))


__all__ = [
    "CONSTANT_CONTROL", "TABLES", "add_list_parser", "catalog_tables", "control_rows", "dataset_rows",
    "encoder_rows", "regime_rows", "run_list", "task_rows",
]
