"""The query API over HTTP: authentication, bad input of every kind, tenant isolation."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pydantic import ValidationError

from grandbo.api.auth import mint_query_token
from grandbo.api.edge import BAD_BODY
from grandbo.api.models import QueryRequest

from .conftest import Gateway

TOPIC = "checkout requests time out waiting for a database connection from the pool"
ENTRY = {
    "title": "PgBouncer pool exhausted on checkout",
    "summary": "Checkout requests waited for a database connection until they timed out.",
}


def test_a_query_returns_ranked_hits_with_reasons(gateway: Gateway, tenant: str) -> None:
    gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
    gateway.drain()
    reply = gateway.query(tenant, {"topic": TOPIC, "limit": 3})
    assert reply.status == 200
    hit = reply.body["hits"][0]
    assert hit["title"] == ENTRY["title"]
    assert hit["why"]["lexical_rank"] == 1
    assert hit["why"]["vector_rank"] == 1
    assert reply.body["metadata"]["vector_leg"] == "ok"
    assert "hints" in reply.body["notice"]
    got = gateway.request(
        "GET",
        f"/v1/memory/entries/{hit['entry_id']}",
        headers={"Authorization": f"Bearer {mint_query_token(gateway.keys[f'{tenant}-query'])}"},
    )
    assert got.status == 200
    assert got.body["summary"] == ENTRY["summary"]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Basic abc",
        "Bearer not-a-token",
        "Bearer gbq1.unknown-key.9999999999." + "0" * 64,
    ],
)
def test_queries_without_a_valid_token_get_401(gateway: Gateway, authorization: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    reply = gateway.request(
        "POST", "/v1/memory/query", json.dumps({"topic": TOPIC}).encode(), headers
    )
    assert reply.status == 401


def test_expired_forged_and_admin_keyed_tokens_get_401(gateway: Gateway, tenant: str) -> None:
    key = gateway.keys[f"{tenant}-query"]
    expired = mint_query_token(key, ttl_s=1, now=time.time() - 10)
    forged = mint_query_token(key)[:-4] + "0000"
    admin_keyed = mint_query_token(gateway.keys[f"{tenant}-admin"])
    for token in (expired, forged, admin_keyed):
        reply = gateway.request(
            "POST",
            "/v1/memory/query",
            json.dumps({"topic": TOPIC}).encode(),
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        assert reply.status == 401


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"topic": ""}, "topic"),
        ({"topic": "   "}, "topic"),
        ({"topic": "slow queries on checkout " * 200}, "topic"),  # 5,000 characters
        ({"topic": "nul byte \u0000 inside the topic text"}, "topic"),
        ({"topic": "checkout-api-slow-queries"}, "topic"),
        ({"topic": 42}, "topic"),
        ({"topic": ["a", "list"]}, "topic"),
        ({}, "topic"),
        ({"topic": TOPIC, "limit": 0}, "limit"),
        ({"topic": TOPIC, "limit": 1000}, "limit"),
        ({"topic": TOPIC, "limit": "5"}, "limit"),
        ({"topic": TOPIC, "limit": 2.5}, "limit"),
        ({"topic": TOPIC, "limit": True}, "limit"),
        ({"topic": TOPIC, "service": "spaces are not allowed"}, "service"),
        ({"topic": TOPIC, "tenant_id": "someone-else"}, "tenant_id"),
    ],
)
def test_bad_input_gets_a_4xx_naming_the_field(
    gateway: Gateway, tenant: str, payload: dict[str, Any], field: str
) -> None:
    reply = gateway.query(tenant, payload)
    try:
        QueryRequest.model_validate(payload)
    except ValidationError:
        # the route's body model refuses it at the edge, as API Gateway's validator does
        # (its answer cannot name the field: a gateway response is one document per API)
        assert reply.status == 400, reply.body
        assert reply.body == BAD_BODY.document()
        return
    assert reply.status in (400, 422), reply.body
    assert reply.body["field"] == field


@pytest.mark.parametrize(
    "raw",
    [
        b'{"topic": "lone \\ud800 surrogate in the topic text"}',
        b"not json at all",
        b'["a", "list"]',
        b'{"topic": "unterminated',
        b"\xff\xfe binary",
    ],
)
def test_malformed_bodies_get_a_4xx(gateway: Gateway, tenant: str, raw: bytes) -> None:
    reply = gateway.query(tenant, None, raw=raw)
    assert 400 <= reply.status < 500, reply.body
    assert "field" in reply.body


def test_an_oversized_body_gets_413(gateway: Gateway, tenant: str) -> None:
    reply = gateway.query(tenant, {"topic": TOPIC + " x" * 40_000})
    assert reply.status == 413


def test_a_tenant_never_reads_writes_corrects_or_retires_another_tenants_entries(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    theirs = gateway.admin(other_tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]
    gateway.drain()
    path = f"/v1/admin/entries/{theirs['entry_id']}"

    mine = gateway.query(tenant, {"topic": TOPIC}).body
    assert mine["hits"] == []
    assert mine["metadata"]["active_entries"] == 0
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    read = gateway.request(
        "GET",
        f"/v1/memory/entries/{theirs['entry_id']}",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert read.status == 404
    assert gateway.admin(tenant, "GET", path).status == 404
    correction = {"title": "Hijacked title", "summary": "Hijacked: " + ENTRY["summary"]}
    assert gateway.admin(tenant, "POST", f"{path}/corrections", correction).status == 404
    assert gateway.admin(tenant, "POST", f"{path}/retirement", {"reason": "x"}).status == 404
    # a body naming the other tenant is refused, never obeyed
    create = gateway.admin(
        tenant, "POST", "/v1/admin/entries", {**ENTRY, "tenant_id": other_tenant}
    )
    assert create.status == 422

    still = gateway.query(other_tenant, {"topic": TOPIC}).body["hits"]
    assert [(h["entry_id"], h["title"], h["revision"]) for h in still] == [
        (theirs["entry_id"], ENTRY["title"], 1)
    ]
