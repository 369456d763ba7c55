"""A minimal JSON Schema checker for the keywords docs/schema/ uses (jsonschema is not a dependency).

Supports type, enum, const, required, properties, additionalProperties, items, prefixItems, minItems,
maxItems, minLength, minimum, pattern, anyOf and $ref (``#/$defs/x``, ``other.schema.json`` and ``other.schema.json#/$defs/x``,
resolved in the same folder). Unknown keywords fail loudly, so a schema cannot silently outgrow it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schema"
KNOWN = {"$schema", "$id", "title", "description", "type", "enum", "const", "required", "properties",
         "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "minLength", "minimum",
         "pattern", "anyOf", "$ref", "$defs"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def _resolve(ref: str, root: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    name, _, pointer = ref.partition("#")
    doc = json.loads((SCHEMAS / name).read_text()) if name else root
    node = doc
    for part in [p for p in pointer.split("/") if p]:
        node = node[part]
    return node, doc


def errors(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None, at: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``value``, as ``<path>: <what>``."""
    root = root if root is not None else schema
    unknown = set(schema) - KNOWN
    assert not unknown, f"schema keyword(s) the checker does not know: {unknown}"
    if "$ref" in schema:
        target, doc = _resolve(schema["$ref"], root)
        return errors(value, target, doc, at)
    out: list[str] = []
    kinds = schema.get("type")
    if kinds is not None and not any(_is(value, k) for k in ([kinds] if isinstance(kinds, str) else kinds)):
        return [f"{at}: expected {kinds}, got {type(value).__name__}"]
    if "const" in schema and value != schema["const"]:
        out.append(f"{at}: expected {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: {value!r} not in {schema['enum']}")
    if "anyOf" in schema and all(errors(value, s, root, at) for s in schema["anyOf"]):
        out.append(f"{at}: matches none of anyOf")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{at}: shorter than {schema['minLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{at}: {value!r} does not match {schema['pattern']}")
    if _is(value, "number") and "minimum" in schema and value < schema["minimum"]:
        out.append(f"{at}: {value} below {schema['minimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{at}: fewer than {schema['minItems']} items")
        if len(value) > schema.get("maxItems", len(value)):
            out.append(f"{at}: more than {schema['maxItems']} items")
        for i, (item, sub) in enumerate(zip(value, schema.get("prefixItems", []), strict=False)):
            out += errors(item, sub, root, f"{at}[{i}]")
        if "items" in schema:
            for i, item in enumerate(value):
                out += errors(item, schema["items"], root, f"{at}[{i}]")
    if isinstance(value, dict):
        out += [f"{at}: missing '{k}'" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                out += errors(item, props[key], root, f"{at}.{key}")
            elif extra is False:
                out.append(f"{at}: unexpected '{key}'")
            elif isinstance(extra, dict):
                out += errors(item, extra, root, f"{at}.{key}")
    return out


def validate(value: Any, name: str) -> list[str]:
    """Violations of ``docs/schema/<name>`` by ``value``."""
    return errors(value, json.loads((SCHEMAS / name).read_text()))
