"""The topology over HTTP: signed writes, token-authenticated reads, tenant-bound."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from grandbo.api.auth import mint_query_token

from .conftest import Gateway


def _svc(name: str) -> dict[str, str]:
    return {"node_type": "Service", "external_id": name}


BATCH = {
    "namespace": "topology",
    "nodes": [_svc(n) for n in ("checkout", "payments", "postgres")],
    "edges": [
        {"source": _svc("checkout"), "edge_type": "DEPENDS_ON", "target": _svc("payments")},
        {"source": _svc("payments"), "edge_type": "DEPENDS_ON", "target": _svc("postgres")},
    ],
}


def _get(gateway: Gateway, tenant: str, route: str, **params: Any) -> Any:
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    return gateway.request(
        "GET",
        f"/v1/topology/{route}?{urlencode(params)}",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_write_then_read_blast_radius_and_criticality(gateway: Gateway, tenant: str) -> None:
    written = gateway.admin(tenant, "POST", "/v1/admin/topology", {**BATCH, "sync": True})
    assert written.status == 200, written.body
    assert written.body["nodes_created"] == 3

    radius = _get(gateway, tenant, "blast-radius", type="Service", id="postgres", hops=3)
    assert radius.status == 200
    assert [(n["external_id"], n["distance"], n["path"]) for n in radius.body["affected"]] == [
        ("payments", 1, ["postgres", "payments"]),
        ("checkout", 2, ["postgres", "payments", "checkout"]),
    ]
    crit = _get(gateway, tenant, "criticality", type="Service", id="postgres")
    assert crit.body["score"] == 1.5
    assert crit.body["basis"] == "reverse_reachability"


def test_bad_topology_requests_are_4xx_naming_the_field(gateway: Gateway, tenant: str) -> None:
    gateway.admin(tenant, "POST", "/v1/admin/topology", BATCH)
    cases = [
        ({"type": "Service' OR 1=1", "id": "postgres"}, "node_type"),
        ({"type": "Service", "id": "postgres", "hops": 4}, "hops"),
        ({"type": "Service", "id": "postgres", "hops": "x"}, "hops"),
        ({"type": "Service", "id": "nope"}, "external_id"),
        ({"type": "Service", "id": "postgres", "as_of": "2026-11-01T00:00:00"}, "as_of"),
        ({"type": "Service", "id": "postgres", "as_of": "yesterday"}, "as_of"),
    ]
    for params, field in cases:
        reply = _get(gateway, tenant, "blast-radius", **params)
        assert reply.status in (400, 422), (params, reply.body)
        assert reply.body["field"] == field, (params, reply.body)
    bad = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/topology",
        {"nodes": [{"node_type": "Database", "external_id": "x"}]},
    )
    assert bad.status == 422
    assert bad.body["field"].startswith("nodes.0.node_type")


def test_another_tenants_topology_is_invisible(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    gateway.admin(other_tenant, "POST", "/v1/admin/topology", BATCH)
    reply = _get(gateway, tenant, "blast-radius", type="Service", id="postgres")
    assert reply.status == 400
    assert reply.body["field"] == "external_id"


def test_query_scope_reaches_dependencies_memory(gateway: Gateway, tenant: str) -> None:
    gateway.admin(tenant, "POST", "/v1/admin/topology", BATCH)
    gateway.admin(
        tenant,
        "POST",
        "/v1/admin/entries",
        {
            "title": "Postgres connection storm",
            "summary": "postgres hit max_connections and every client waited for a connection.",
            "service": "postgres",
        },
    )
    topic = {
        "topic": "checkout requests wait for a database connection and time out",
        "service": "checkout",
    }
    narrow = gateway.query(tenant, topic).body
    wide = gateway.query(tenant, {**topic, "scope": "dependencies"}).body
    assert narrow["hits"] == []
    assert [h["service"] for h in wide["hits"]] == ["postgres"]
    assert wide["metadata"]["services_in_scope"] == ["checkout", "payments", "postgres"]
