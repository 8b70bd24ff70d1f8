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
    ("/v1/topology/blast-radius", "get"): "BlastRadius",
    ("/v1/topology/criticality", "get"): "Criticality",
}


def _document_answers(document: dict[str, Any]) -> None:
    from grandbo.memory.domain.models import MemoryQueryResult
    from grandbo.topology.model import BlastRadius, Criticality

    models = {m.__name__: m for m in (MemoryQueryResult, BlastRadius, Criticality)}
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


def openapi_json() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
