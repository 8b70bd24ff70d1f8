"""The local gateway answers as the deployed edge would (issue 23, item 4).

Each request goes to the local runner and to an interpreter of the synthesized dev
template (tests/infra/deployed_edge.py: its WAF rules, resources, methods, validators,
models and gateway responses); where the template says the edge refuses, the local
gateway refuses with the same status and document, and where the template lets the
request through, so does the local gateway (the function answers, not the edge).
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from grandbo.api.auth import mint_query_token
from grandbo.api.edge import GATEWAY_RESPONSES, NO_USER_AGENT
from grandbo.api.models import MAX_BODY_BYTES
from tests.infra.deployed_edge import DeployedEdge
from tests.infra.legitimate_bodies import LEGITIMATE_FINDINGS

from .conftest import Gateway

TOPIC = "checkout requests time out because the database connection pool is exhausted"
ENTRY = str(uuid.uuid4())


@pytest.fixture(scope="module")
def deployed() -> DeployedEdge:
    from tests.infra.conftest import _synth

    _, template = _synth("dev")
    return DeployedEdge(template.to_json())


def _query(topic: Any = TOPIC, **extra: Any) -> bytes:
    return json.dumps({"topic": topic, **extra}).encode()


# (method, path, body, what the request leaves out or breaks)
REQUESTS: dict[str, tuple[str, str, bytes, dict[str, Any]]] = {
    "a query": ("POST", "/v1/memory/query", _query(), {}),
    "a query without a User-Agent": ("POST", "/v1/memory/query", _query(), {"agent": None}),
    "a query without a token": ("POST", "/v1/memory/query", _query(), {"token": False}),
    "a query over the body limit": (
        "POST",
        "/v1/memory/query",
        _query("pool exhausted " * (MAX_BODY_BYTES // 10)),
        {},
    ),
    "a query whose limit the model refuses": ("POST", "/v1/memory/query", _query(limit=0), {}),
    "a query with a field the model lacks": (
        "POST",
        "/v1/memory/query",
        _query(tenant_id="someone-else"),
        {},
    ),
    "a query that is not JSON": ("POST", "/v1/memory/query", b"topic=pool", {}),
    "an entry": ("GET", f"/v1/memory/entries/{ENTRY}", b"", {}),
    "an entry without a token": ("GET", f"/v1/memory/entries/{ENTRY}", b"", {"token": False}),
    "feedback with a verdict the model refuses": (
        "POST",
        f"/v1/memory/entries/{ENTRY}/feedback",
        json.dumps({"verdict": "great", "incident_id": "INC-1"}).encode(),
        {},
    ),
    "a blast radius": ("GET", "/v1/topology/blast-radius?type=Service&id=checkout-api", b"", {}),
    "a blast radius without its id": ("GET", "/v1/topology/blast-radius?type=Service", b"", {}),
    "a criticality without its type": ("GET", "/v1/topology/criticality?id=x", b"", {}),
    "a criticality with an empty id": ("GET", "/v1/topology/criticality?type=Service&id=", b"", {}),
    "an unknown route": ("GET", "/v1/memory/everything", b"", {}),
    "a method the route lacks": ("DELETE", "/v1/memory/query", b"", {}),
    "the API's root": ("GET", "/", b"", {}),
    "an unsigned admin write": (
        "POST",
        "/v1/admin/entries",
        json.dumps({"title": "t", "summary": "s"}).encode(),
        {},
    ),
    "an admin read without a User-Agent": ("GET", "/v1/admin/review", b"", {"agent": None}),
    # the console's routes (issue 26) are the admin function's, behind the same edge
    "an unsigned explanation": (
        "POST",
        "/v1/admin/explanation",
        json.dumps({"topic": TOPIC, "entry_id": ENTRY}).encode(),
        {},
    ),
    "an entry's history without a User-Agent": (
        "GET",
        f"/v1/admin/entries/{ENTRY}/history",
        b"",
        {"agent": None},
    ),
    "an oversized catalog request": (
        "POST",
        "/v1/admin/catalog",
        json.dumps({"text": "x" * MAX_BODY_BYTES}).encode(),
        {},
    ),
    "HEAD on the admin routes (ANY includes it)": ("HEAD", "/v1/admin/review", b"", {}),
    "TRACE, which no route has": ("TRACE", "/v1/memory/query", b"", {}),
    "TRACE without a User-Agent": ("TRACE", "/v1/memory/query", b"", {"agent": None}),
    "a query body of another media type (no model applies)": (
        "POST",
        "/v1/memory/query",
        _query(limit=0),
        {"content_type": "application/json-patch+json"},
    ),
}
EDGE_DOCUMENTS = [NO_USER_AGENT.document()] + [r.document() for r in GATEWAY_RESPONSES.values()]


@pytest.mark.parametrize("case", list(REQUESTS))
def test_the_local_gateway_refuses_what_the_deployed_edge_refuses(
    case: str, gateway: Gateway, tenant: str, deployed: DeployedEdge
) -> None:
    method, path, body, broken = REQUESTS[case]
    headers = {"Content-Type": broken.get("content_type", "application/json")}
    if broken.get("token", True):
        headers["Authorization"] = f"Bearer {mint_query_token(gateway.keys[f'{tenant}-query'])}"
    identified = broken.get("agent", True) is not None
    url = urlsplit(path)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    sent = {**headers, **({"User-Agent": "grandbo/test (parity)"} if identified else {})}
    expected = deployed.answer(
        method, url.path, query, sent, body, token_valid=broken.get("token", True)
    )
    reply = gateway.request(method, path, body or None, headers, identified=identified)
    if expected is None:  # the edge lets it through: a function answers
        assert reply.body not in EDGE_DOCUMENTS, (case, reply.status, reply.body)
    else:
        assert (reply.status, reply.body) == expected, case


@pytest.mark.parametrize("finding", LEGITIMATE_FINDINGS, ids=lambda f: f.rule)
def test_incident_text_the_body_rules_would_flag_is_stored_and_found(
    finding: Any, gateway: Gateway, tenant: str, deployed: DeployedEdge
) -> None:
    """Post-mortem sentences shaped like what the Core rule set's body rules look for get
    through the edge (the stack counts those rules: tests/infra/test_edge_firewall.py),
    are stored and are found again."""
    payload = {"title": finding.title, "summary": finding.summary, "service": "edge-web"}
    created = gateway.admin(tenant, "POST", "/v1/admin/entries", payload)
    assert created.status == 201, created.body
    gateway.drain()
    found = gateway.query(tenant, {"topic": finding.topic, "limit": 5})
    assert found.status == 200, found.body
    assert created.body["entry"]["entry_id"] in [hit["entry_id"] for hit in found.body["hits"]]
