"""The OpenAPI document of the HTTP API, generated from the handlers' own routes and models.

`grandbo openapi > docs/openapi.json` refreshes the checked-in copy; a test fails when the
copy and the code disagree.
"""

from __future__ import annotations

import json
import re
from typing import Any

from grandbo import __version__

_AUTH_DOC = {
    "securitySchemes": {
        "queryToken": {
            "type": "http",
            "scheme": "bearer",
            "description": "gbq1.{key_id}.{expiry}.{hmac}: mint with `grandbo token`; bound to "
            "the key's tenant.",
        },
        "adminSignature": {
            "type": "apiKey",
            "in": "header",
            "name": "x-grandbo-signature",
            "description": "HMAC-SHA256 hex over '{timestamp}\\n{nonce}\\n{METHOD}\\n{path}\\n"
            "{sha256(body)}\\n{Idempotency-Key or empty}', with x-grandbo-key-id, "
            "x-grandbo-timestamp (unix seconds, +/- 300 s) and x-grandbo-nonce (single use). "
            "A key is a person's (`grandbo people add`: every event it writes names "
            "`person:EMAIL`, and its role bounds the routes, see x-grandbo-role) or a "
            "service's (`admin:KEY_ID`).",
        },
    }
}


def openapi_document() -> dict[str, Any]:
    from functions.admin_api.handler import app as admin_app
    from functions.query_api.handler import app as query_app

    title = "Grandbo memory API"
    query: dict[str, Any] = json.loads(
        query_app.get_openapi_json_schema(title=title, version=__version__)
    )
    admin = json.loads(admin_app.get_openapi_json_schema(title=title, version=__version__))
    for path_item in query["paths"].values():
        for operation in path_item.values():
            operation["security"] = [{"queryToken": []}]
    for path, path_item in admin["paths"].items():
        for method, operation in path_item.items():
            operation["security"] = [{"adminSignature": []}]
            _document_role(operation, method, path)
    query["paths"].update(admin["paths"])
    schemas = query.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(admin.get("components", {}).get("schemas", {}))
    _document_answers(query)
    _document_statuses(query)
    query["components"].update(_AUTH_DOC)
    query["info"]["description"] = (
        "Institutional memory for incident investigation. Results are hints to verify with "
        "live tools, not ground truth."
    )
    return query


def _document_role(operation: dict[str, Any], method: str, path: str) -> None:
    """The least role a person's key needs for the route, and its 403."""
    from grandbo.api.people import ADMIN_ROUTE_ROLES

    role = ADMIN_ROUTE_ROLES[(method.upper(), re.sub(r"\{([a-z_]+)\}", r"<\1>", path))]
    operation["x-grandbo-role"] = role
    operation.setdefault("responses", {})["403"] = {
        "description": f"the signing key is a person's whose role is below {role} "
        "(viewer < curator < admin); a service's key may do what an admin may"
    }


# The read routes answer the domain's own documents (the handlers return them dumped):
# their schemas are documented from the models, so a field such as a hit's `staleness`
# is in the document.
_ANSWERS = {
    ("/v1/memory/query", "post"): "MemoryQueryResult",
    ("/v1/admin/query", "post"): "MemoryQueryResult",
    ("/v1/memory/entries/{entry_id}", "get"): "MemoryEntry",
    ("/v1/admin/entries/{entry_id}", "get"): "MemoryEntry",
    ("/v1/admin/entries", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/corrections", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/retirement", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/promotion", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/split", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/merge-policy", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/merge", "post"): "WriteOutcome",
    ("/v1/admin/entries/{entry_id}/redaction", "post"): "RedactionOutcome",
    ("/v1/topology/blast-radius", "get"): "BlastRadius",
    ("/v1/topology/criticality", "get"): "Criticality",
}
# Routes that answer 201 when they wrote something new (200 for a redelivery: a no-op)
_CREATED = {
    ("/v1/admin/entries", "post"),
    ("/v1/admin/entries/{entry_id}/corrections", "post"),
    ("/v1/admin/people", "post"),
    ("/v1/memory/entries/{entry_id}/feedback", "post"),
}


def _document_answers(document: dict[str, Any]) -> None:
    from grandbo.memory.domain.models import (
        MemoryEntry,
        MemoryQueryResult,
        RedactionOutcome,
        WriteOutcome,
    )
    from grandbo.topology.model import BlastRadius, Criticality

    models = {
        m.__name__: m
        for m in (
            MemoryQueryResult,
            MemoryEntry,
            WriteOutcome,
            RedactionOutcome,
            BlastRadius,
            Criticality,
        )
    }
    schemas = document["components"]["schemas"]
    for (path, method), name in _ANSWERS.items():
        schema = models[name].model_json_schema(
            ref_template="#/components/schemas/{model}", mode="serialization"
        )
        for other, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(other, definition)
        schemas.setdefault(name, schema)
        answer = document["paths"][path][method]["responses"]["200"]
        answer["content"]["application/json"]["schema"] = {"$ref": f"#/components/schemas/{name}"}
    for path, method in _CREATED:
        responses = document["paths"][path][method]["responses"]
        responses["201"] = {**responses["200"], "description": "Written"}
        responses["200"] = {
            **responses["200"],
            "description": "Already written: a redelivery of the same Idempotency-Key (a no-op)",
        }


_ERROR = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "a code: invalid_input, not_found, ..."},
        "message": {"type": "string", "description": "what is wrong, in words"},
        "field": {"type": "string", "description": "the field or header at fault, if one"},
    },
    "description": "Every refusal's body, on every route",
}
_RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}
}
# Routes whose write can meet another (a revision, an entry no longer active, a merge or
# a purge refused, people managed by the stack's identity): 409
_CONFLICTS = re.compile(
    r"^/v1/admin/(entries/\{entry_id\}/(corrections|retirement|promotion|split|merge"
    r"|merge-policy|distinct|redaction)|purge(/confirmation)?|import|people(/.*)?|calibration)$"
    r"|^/v1/memory/entries/\{entry_id\}/feedback$"
)


# Routes whose body names an entry or a person that may not exist: 404
_NAMED_IN_BODY = {
    "/v1/admin/explanation",
    "/v1/admin/people/link",
    "/v1/admin/people/revocation",
    "/v1/admin/people/removal",
}


def _document_statuses(document: dict[str, Any]) -> None:
    """Every status a route answers besides its success, each with the one error body:
    from the handlers' error mapping (grandbo.api.http_errors) and the edge's
    (grandbo.api.edge: 401 unsigned, 429 throttled, with Retry-After)."""
    document["components"]["schemas"]["Error"] = _ERROR
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, item in document["paths"].items():
        for operation in item.values():
            statuses = {
                "400": "a field or the body refused, named in `field`",
                "401": "no credentials, or ones that do not hold (a replayed nonce included)",
                "429": "too many requests (the organization's query rate, a caller's verdicts, "
                "or the edge's throttle); retry after Retry-After",
                "503": "the memory store is unavailable (a failover, a writer read-only); "
                "retry after Retry-After",
                # any method: the edge reads a body whatever the method, and its WAF refuses
                "403": "refused by the edge (a request without a User-Agent), or a "
                "person's key below the route's role",
                "413": "the body exceeds 64 KiB",
                "415": "a body whose Content-Type is not application/json",
            }
            if "{" in path or path in _NAMED_IN_BODY:
                statuses["404"] = "no such entry, question, verdict or person in this organization"
            if "{entry_id}" in path or path == "/v1/admin/explanation":
                statuses["410"] = "the entry was redacted: its tombstone (who, when, why)"
            if _CONFLICTS.match(path):
                statuses["409"] = (
                    "a conflict: another revision, an entry not active, a merge or purge "
                    "refused, or people managed elsewhere"
                )
            responses = operation.setdefault("responses", {})
            responses["422"] = {
                **responses.get("422", {}),
                "description": "the request's shape (a field's type or bounds), or a topic "
                "that is not a sentence",
                "content": body,
            }
            for status, meaning in statuses.items():
                answer: dict[str, Any] = {"description": meaning, "content": body}
                if status in ("429", "503"):
                    answer["headers"] = _RETRY_AFTER
                responses.setdefault(status, answer)
            # an admin route's 403 was described by its role (_document_role): its body too
            responses["403"]["content"] = body


def openapi_json() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
