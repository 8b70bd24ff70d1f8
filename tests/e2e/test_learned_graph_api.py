"""The learned graph and staleness over the local runner (issue 27): incident-closed
events feed `scope: correlated` and `namespaces: learned`; a hit about a renamed service
says so in its `staleness`, in the recall hook's block and in the MCP answer."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from grandbo.agent.backends import RemoteBackend, StoreBackend
from grandbo.agent.server import build_server, fixed_tenant
from grandbo.api.auth import mint_query_token
from grandbo.api.client import MemoryClient
from grandbo.api.recall import RecallHook

from .conftest import Gateway
from .test_topology_api import _get

TOPIC = "checkout requests failed because the orders database ran out of connections"


def closed(tenant: str, incident_id: str, service: str, cause: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": f"evt-{incident_id}",
        "detail-type": "IncidentClosed",
        "source": "landfall.incidents",
        "account": "123456789012",
        "time": "2026-11-29T10:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "tenant_id": tenant,
            "incident_id": incident_id,
            "title": "Checkout errors",
            "service": service,
            "closed_at": "2026-11-29T09:55:00Z",
            "findings": [
                {
                    "finding_id": "f1",
                    "status": "corroborated",
                    "title": f"Connections exhausted on {cause}",
                    "summary": f"The {cause} database ran out of connections and checkout "
                    "requests failed to connect until the pool was resized.",
                    "service": cause,
                }
            ],
        },
    }


def test_incidents_feed_the_correlated_scope_and_learned_walks_of_their_tenant_only(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    for number, cause in (("1", "orders"), ("2", "orders"), ("3", "ledger")):
        assert gateway.publish(closed(tenant, f"INC-{number}", "checkout", cause)).status == 200
    gateway.publish(closed(tenant, "INC-1", "checkout", "orders"))  # redelivered
    gateway.publish(closed(other_tenant, "INC-1", "checkout", "vault"))

    wide = gateway.query(
        tenant, {"topic": TOPIC, "service": "checkout", "scope": "correlated", "limit": 10}
    )
    assert wide.status == 200, wide.body
    assert wide.body["metadata"]["services_in_scope"] == ["checkout", "orders", "ledger"]
    assert {hit["service"] for hit in wide.body["hits"]} == {"orders", "ledger"}
    theirs = gateway.query(
        other_tenant, {"topic": TOPIC, "service": "checkout", "scope": "correlated"}
    )
    assert theirs.body["metadata"]["services_in_scope"] == ["checkout", "vault"]

    radius = _get(
        gateway, tenant, "blast-radius", type="Service", id="orders", namespaces="learned"
    )
    assert radius.status == 200, radius.body
    assert radius.body["namespaces"] == "learned"
    assert [n["external_id"] for n in radius.body["affected"]] == ["checkout", "ledger"]
    crit = _get(gateway, tenant, "criticality", type="Service", id="orders", namespaces="both")
    assert crit.body["basis"] == "reverse_reachability+learned"
    bad = _get(gateway, tenant, "criticality", type="Service", id="orders", namespaces="all")
    assert (bad.status, bad.body["field"]) == (422, "namespaces")
    # a moment without a zone is refused (by the edge's model: RFC 3339 needs the offset)
    naive = gateway.query(tenant, {"topic": TOPIC, "as_of": "2026-11-01T00:00:00"})
    assert naive.status == 400
    assert naive.body["field"] in ("as_of", "body"), naive.body


def test_a_lesson_about_a_renamed_service_says_so_everywhere_it_is_served(
    gateway: Gateway, tenant: str
) -> None:
    def sync(*nodes: dict[str, Any]) -> None:
        reply = gateway.admin(
            tenant, "POST", "/v1/admin/topology", {"nodes": list(nodes), "sync": True}
        )
        assert reply.status == 200, reply.body

    sync({"node_type": "Service", "external_id": "orders"})
    created = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {
            "title": "Orders database pool exhausted",
            "summary": "Checkout requests failed because the orders database ran out of "
            "connections during the sale.",
            "service": "orders",
        },
    )
    assert created.status == 201
    gateway.drain()
    before = gateway.query(tenant, {"topic": TOPIC})
    assert before.body["hits"][0]["staleness"] is None
    sync({"node_type": "Service", "external_id": "order-service", "replaces": "orders"})

    hit = gateway.query(tenant, {"topic": TOPIC}).body["hits"][0]
    assert hit["staleness"]["changes"][0]["kind"] == "renamed"
    assert hit["staleness"]["changes"][0]["replaced_by"] == "order-service"
    note = hit["staleness"]["note"]
    assert note.startswith('Stale: "orders" was renamed to "order-service" on ')
    # the replay of an incident before the rename sees no change
    then = gateway.query(tenant, {"topic": TOPIC, "as_of": before.body["hits"][0]["created_at"]})
    assert then.body["hits"][0]["staleness"] is None

    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    base = f"http://{gateway.host}:{gateway.port}"
    recall = RecallHook(base, token, timeout_s=5).recall(TOPIC)
    assert recall.reason is None, recall.detail
    assert f"\n   {note}" in recall.block

    async def ask(backend: Any, tenant_of: str | None, arguments: dict[str, Any]) -> Any:
        async with Client(build_server(backend, fixed_tenant(tenant_of))) as client:
            return await client.call_tool("query_org_memory", {"topic": TOPIC, **arguments})

    for backend, tenant_of in (
        (StoreBackend(gateway.runtime), tenant),
        (RemoteBackend(MemoryClient(base, token)), None),
    ):
        result = anyio.run(ask, backend, tenant_of, {})
        assert not result.is_error, result.content
        assert result.structured_content["hits"][0]["staleness"]["note"] == note
        # the answer a model reads says it in words, quoted as data
        assert json.dumps(note, ensure_ascii=False) in result.content[0].text
        past = anyio.run(ask, backend, tenant_of, {"as_of": before.body["hits"][0]["created_at"]})
        assert not past.is_error, past.content
        assert past.structured_content["hits"][0]["staleness"] is None


def test_the_openapi_document_describes_scope_namespaces_as_of_and_staleness() -> None:
    from grandbo.openapi import openapi_document

    document = openapi_document()
    schemas = document["components"]["schemas"]
    query = schemas["QueryRequest"]["properties"]
    assert "correlated" in query["scope"]["anyOf"][0]["enum"]
    assert query["as_of"]["anyOf"][0]["format"] == "date-time"
    for route in ("/v1/topology/blast-radius", "/v1/topology/criticality"):
        parameters = {p["name"]: p for p in document["paths"][route]["get"]["parameters"]}
        assert "namespaces" in parameters, route
    answer = document["paths"]["/v1/memory/query"]["post"]["responses"]["200"]
    assert answer["content"]["application/json"]["schema"]["$ref"].endswith("/MemoryQueryResult")
    assert "staleness" in schemas["MemoryHit"]["properties"]
    assert "as_of" in schemas["QueryMetadata"]["properties"]
    kinds = schemas["TopologyChange"]["properties"]["kind"]["enum"]
    assert set(kinds) == {"retired", "renamed", "dependency_gone", "dependency_renamed"}
    assert "replaces" in schemas["TopologyNode"]["properties"]
    assert "namespaces" in schemas["BlastRadius"]["properties"]
