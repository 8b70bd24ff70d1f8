"""Issue 28 (from its break-it pass): hostile queries through the local gateway reaching
grandbo_search / grandbo_pair_distances: never a 5xx, never another tenant's entry."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes, index_name
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway

ENTRY = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked connections on a retry path until requests "
    "timed out waiting for a connection from the pool.",
    "service": "checkout-api",
}
TOPIC = "checkout requests time out waiting for a database connection from the pool"

HOSTILE = [
    {"topic": "checkout \u0000 requests time out waiting"},
    {"topic": "checkout \ud800 requests time out waiting"},
    {"topic": "checkout requests time out waiting", "service": "checkout\u0000api"},
    {"topic": "checkout requests time out waiting", "service": "\ud800"},
    {"topic": "checkout requests time out waiting", "service": "x" * 5000},
    {"topic": " ".join(f"w{n}" for n in range(1300))},
    {"topic": "!!! ??? ... --- *** %%% '' \"\" ;; DROP TABLE"},
    {"topic": "チェックアウト の 接続 が 枯渇 した 障害 です"},
    {"topic": "checkout requests time out waiting", "as_of": "0001-01-01T00:00:00Z"},
    {"topic": "checkout requests time out waiting", "as_of": "9999-12-31T23:59:59Z"},
    {"topic": "checkout requests time out waiting", "scope": "correlated", "service": "x"},
    {"topic": "checkout requests time out waiting", "scope": "blast_radius", "service": "x"},
    {"topic": "checkout requests time out waiting", "limit": 50},
    {"topic": "checkout' OR 1=1 -- requests time out waiting for it"},
]


@pytest.mark.parametrize("payload", HOSTILE, ids=[str(n) for n in range(len(HOSTILE))])
def test_a_hostile_query_is_never_a_5xx(gateway: Gateway, tenant: str, payload: Any) -> None:
    gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
    gateway.drain()
    reply = gateway.query(tenant, payload)
    assert reply.status < 500, reply.body


def test_explain_of_another_tenants_entry_with_an_index(
    gateway: Gateway,
    tenant: str,
    other_tenant: str,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
) -> None:
    for n in range(6):
        body = {**ENTRY, "title": f"{ENTRY['title']} {n}"}
        gateway.admin(tenant, "POST", "/v1/admin/entries", body)
        gateway.admin(other_tenant, "POST", "/v1/admin/entries", body)
    gateway.drain()
    theirs = gateway.query(other_tenant, {"topic": TOPIC}).body["hits"]
    assert theirs
    try:
        ensure_hnsw_indexes(database.admin, min_entries=5)
        reply = gateway.query(tenant, {"topic": TOPIC})
        assert reply.status == 200, reply.body
        mine = {h["entry_id"] for h in reply.body["hits"]}
        assert mine
        assert not mine & {h["entry_id"] for h in theirs}
        foreign = gateway.admin(
            tenant,
            "POST",
            "/v1/admin/explanation",
            {"topic": TOPIC, "entry_id": theirs[0]["entry_id"]},
        )
        assert foreign.status < 500, foreign.body
        assert theirs[0]["title"] not in str(foreign.body)
    finally:
        for t in (tenant, other_tenant):
            admin_conn.execute(f"DROP INDEX IF EXISTS {index_name(t)}")
