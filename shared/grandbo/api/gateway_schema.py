"""Request models for API Gateway, generated from the pydantic request models.

API Gateway validates bodies against JSON Schema draft 4 before a Lambda runs; the
handlers validate the same bodies with pydantic. Writing the contract twice let them
drift (the gateway refused `scope`, which the handler accepts), so the gateway's copy is
derived from the pydantic one: nullable unions become draft-4 type lists, and what draft 4
or API Gateway cannot read (titles, defaults, references) is left out or refused loudly.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

DRAFT4 = "http://json-schema.org/draft-04/schema#"
# documentation only: draft 4 has no `examples`, and the edge validates, never documents
_DROPPED = {"title", "default", "examples"}


def gateway_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema (validation mode) as API Gateway's draft 4."""
    schema = _draft4(model.model_json_schema(mode="validation"))
    return {"$schema": DRAFT4, **schema}


def _draft4(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node or "$defs" in node:
        raise ValueError("nested models need a gateway model of their own; inline them")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            out[key] = {name: _draft4(child) for name, child in value.items()}
        elif key == "items":
            out[key] = _draft4(value)
        elif key == "anyOf":
            out.update(_nullable(value))
        else:
            out[key] = value
    return out


def _nullable(options: list[dict[str, Any]]) -> dict[str, Any]:
    """`anyOf: [X, {type: null}]` (pydantic's `X | None`) as draft 4's `type: [X, null]`."""
    rest = [option for option in options if option != {"type": "null"}]
    if len(rest) != 1 or len(options) != 2 or "type" not in rest[0]:
        raise ValueError(f"only `X | None` unions translate to draft 4, not {options}")
    merged = _draft4(rest[0])
    if "enum" in merged:  # an enum holds no null for every toolchain: keep the union
        return {"anyOf": [merged, {"type": "null"}]}
    merged["type"] = [merged["type"], "null"]
    return merged
