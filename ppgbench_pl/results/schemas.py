"""The JSON Schemas of ppgbench's result files (``ppgbench_pl/schema/``), checked with :mod:`jsonschema`.

Relative ``$ref`` between the schemas resolve through one offline :class:`referencing.Registry` keyed by ``$id``.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

#: The schema files, by what they describe.
RECORD = "results.schema.json"
EXPORT = "ppgbench-results.schema.json"
EXPORT_V1 = "ppgbench-results.v1.schema.json"
NAMES = (RECORD, EXPORT, EXPORT_V1)


def load(name: str) -> dict[str, Any]:
    """One schema as a JSON object."""
    return json.loads(resources.files("ppgbench_pl").joinpath("schema", name).read_text())


@cache
def registry() -> Any:
    """Every schema under its ``$id``: relative references between them resolve offline."""
    from referencing import Registry, Resource

    return Registry().with_resources((load(n)["$id"], Resource.from_contents(load(n))) for n in NAMES)


@cache
def validator(name: str) -> Any:
    """A Draft 2020-12 validator of one schema, resolving through :func:`registry`."""
    from jsonschema import Draft202012Validator

    schema = load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry())


def errors(document: Any, name: str) -> list[str]:
    """Every violation of schema ``name``, each as ``<JSON path>: <what>`` (short: never the whole value)."""
    return [_line(e) for e in sorted(validator(name).iter_errors(document), key=lambda e: list(e.path))]


def first_error(document: Any, name: str) -> str | None:
    """The most relevant violation (:func:`jsonschema.exceptions.best_match`), or None when it validates."""
    from jsonschema.exceptions import best_match

    error = best_match(validator(name).iter_errors(document))
    return None if error is None else _line(error)


def _line(error: Any) -> str:
    message = " ".join(str(error.message).split())
    return f"{error.json_path}: {message[:160]}{'...' if len(message) > 160 else ''}"
