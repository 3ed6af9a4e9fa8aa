"""A small JSON Schema (2020-12) validator: only the keywords docs/transcript-v1.schema.json uses.

The `jsonschema` package is not a dependency; this is enough to hold the writer to the schema,
and `test_the_subset_validator_knows_every_keyword_the_schema_uses` keeps it honest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "transcript-v1.schema.json"
# Keywords that constrain; the rest only annotate.
ASSERTING = {"type", "const", "enum", "required", "properties", "minimum", "pattern", "allOf",
             "anyOf", "not", "if", "then", "$ref"}
ANNOTATING = {"$schema", "$id", "$defs", "title", "description"}

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1."""
    return type(a) is type(b) and a == b


def errors(instance: Any, schema: Any, root: dict[str, Any], where: str = "$") -> list[str]:
    """Every way `instance` fails `schema` (empty when it is valid)."""
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{where}: nothing is allowed here"]
    found: list[str] = []
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        found += errors(instance, root["$defs"][ref[len("#/$defs/"):]], root, where)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[name](instance) for name in names):
            found.append(f"{where}: not {' or '.join(names)}")
    if "const" in schema and not _same(instance, schema["const"]):
        found.append(f"{where}: not {schema['const']!r}")
    if "enum" in schema and not any(_same(instance, item) for item in schema["enum"]):
        found.append(f"{where}: not one of {schema['enum']}")
    if "minimum" in schema and _TYPES["number"](instance) and instance < schema["minimum"]:
        found.append(f"{where}: below {schema['minimum']}")
    if "pattern" in schema and isinstance(instance, str) \
            and not re.search(schema["pattern"], instance):
        found.append(f"{where}: does not match {schema['pattern']}")
    if isinstance(instance, dict):
        for name in schema.get("required", ()):
            if name not in instance:
                found.append(f"{where}: missing {name!r}")
        for name, sub in schema.get("properties", {}).items():
            if name in instance:
                found += errors(instance[name], sub, root, f"{where}.{name}")
    for sub in schema.get("allOf", ()):
        found += errors(instance, sub, root, where)
    if "anyOf" in schema and all(errors(instance, sub, root, where) for sub in schema["anyOf"]):
        found.append(f"{where}: matches none of anyOf")
    if "not" in schema and not errors(instance, schema["not"], root, where):
        found.append(f"{where}: matches what is excluded")
    if "if" in schema and not errors(instance, schema["if"], root, where):
        found += errors(instance, schema.get("then", True), root, where)
    return found


def keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in `schema` (property names and $defs names excluded)."""
    if not isinstance(schema, dict):
        return set()
    used = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            for sub in value.values():
                used |= keywords(sub)
        elif key in ("allOf", "anyOf"):
            for sub in value:
                used |= keywords(sub)
        elif key in ("not", "if", "then"):
            used |= keywords(value)
    return used
