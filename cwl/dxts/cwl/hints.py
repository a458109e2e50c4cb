"""The dirac: hint vocabulary: the JSON schema (package data) and validation against it.

The schema is `dirac-hints-1.0.json` of the specification, copied into this package so that
validation works wherever dxts is installed, with dxts's extensions (each says so in its
description): `dirac:Workgraph.start`. Every schema error is reported, each at the
document path of the hint plus the JSON-schema path inside it. A field the vocabulary does not
have is reported at that field's own path with the closest known name ("did you mean"): a typo
is the likeliest cause, and a message naming the object that holds it would not say which.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource

from dxts.cwl.problems import Kind, Problem, error, join

SCHEMA_FILE = "dirac-hints-1.0.json"
HINT_DEFINITIONS = {
    "dirac:Workgraph": "workgraph",
    "dirac:Transformation": "transformation",
    "dirac:Job": "job",
    "dirac:Feeder": "feeder",
}


@cache
def schema() -> dict[str, Any]:
    text = resources.files("dxts.cwl").joinpath("data", SCHEMA_FILE).read_text()
    return dict(json.loads(text))


@cache
def _validator(definition: str) -> Draft202012Validator:
    root = schema()
    registry: Registry[Any] = Registry().with_resource(root["$id"], Resource.from_contents(root))
    return Draft202012Validator({"$ref": f"{root['$id']}#/$defs/{definition}"}, registry=registry)


def check_hint(cls: str, body: Any, path: str) -> list[Problem]:
    """Every schema error of one dirac hint (`cls` normalised, e.g. `dirac:Transformation`)."""
    definition = HINT_DEFINITIONS.get(cls)
    if definition is None:
        known = ", ".join(sorted(HINT_DEFINITIONS))
        return [
            error(Kind.HINT_SCHEMA, path, f"{cls} is not a dirac hint; the vocabulary has {known}")
        ]
    problems = []
    for found in sorted(
        _validator(definition).iter_errors(body), key=lambda e: list(e.absolute_path)
    ):
        where = join(path, *found.absolute_path)
        if found.validator == "additionalProperties" and isinstance(found.instance, dict):
            problems += _unknown_fields(found, where)
            continue
        schema_path = "/".join(str(p) for p in found.relative_schema_path)
        problems.append(error(Kind.HINT_SCHEMA, where, f"{found.message} (schema: {schema_path})"))
    return problems


def _unknown_fields(found: ValidationError, where: str) -> list[Problem]:
    """One problem per field the schema does not allow, at the field, naming the closest one."""
    known = sorted(found.schema.get("properties", {})) if isinstance(found.schema, dict) else []
    given = found.instance if isinstance(found.instance, dict) else {}
    problems = []
    for name in sorted(str(key) for key in given if key not in known):
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        problems.append(
            error(
                Kind.HINT_SCHEMA,
                join(where, name),
                f"{name!r} is not a field here; {hint}(fields: {', '.join(known) or 'none'})",
            )
        )
    return problems
