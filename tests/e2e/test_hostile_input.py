"""Hostile bytes over HTTP: every one is a 4xx JSON error naming the field, never a 5xx,
and nothing of it is stored (issue 11, items 3, 4 and 8)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from grandbo.api.auth import mint_query_token, sign_admin_request
from grandbo.api.client import user_agent

from .conftest import Gateway
from .test_incident_closed import incident_event

ENTRY = {
    "title": "Disk filled by debug logs",
    "summary": "A debug flag left on after an incident filled the log volume in two hours.",
}
SVC = {"node_type": "Service", "external_id": "checkout"}


def _events(admin_conn: psycopg.Connection[Any], tenant: str) -> int:
    row = admin_conn.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    return int(row[0]) if row else -1


def _raw_admin(gateway: Gateway, tenant: str, path: str, raw: bytes) -> Any:
    headers = sign_admin_request(gateway.keys[f"{tenant}-admin"], "POST", path, raw)
    return gateway.request("POST", path, raw, {"Content-Type": "application/json", **headers})


def _assert_4xx_naming(reply: Any, field: str) -> None:
    assert 400 <= reply.status < 500, reply.body
    assert isinstance(reply.body, dict), reply.body
    assert field in reply.body.get("field", "") + reply.body.get("message", ""), reply.body


DEEP = b'{"title": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
BIG_INT = b'{"title": "x", "summary": "y", "tags": [' + b"9" * 5_000 + b"]}"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (DEEP, "body"),
        (BIG_INT, "body"),
        (b'{"title": NaN, "summary": "x"}', "body"),
        (b'{"title": 1e999, "summary": "x"}', "body"),
        (json.dumps([ENTRY, {**ENTRY, "title": "Second one"}]).encode(), "body"),
        (b'"just a string"', "body"),
        (json.dumps({**ENTRY, "incident_id": "INC-\u0000"}).encode(), "incident_id"),
        (json.dumps({**ENTRY, "tags": ["ok", "lone \ud800"]}).encode(), "tags"),
    ],
)
def test_hostile_create_bodies_get_a_4xx_and_store_nothing(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any], raw: bytes, field: str
) -> None:
    reply = _raw_admin(gateway, tenant, "/v1/admin/entries", raw)
    _assert_4xx_naming(reply, field)
    assert _events(admin_conn, tenant) == 0


@pytest.mark.parametrize(
    "raw",
    [DEEP, BIG_INT, json.dumps([{"topic": "x"}, {"topic": "y"}]).encode(), b"[]"],
)
def test_hostile_query_bodies_get_a_4xx(gateway: Gateway, tenant: str, raw: bytes) -> None:
    _assert_4xx_naming(gateway.query(tenant, None, raw=raw), "body")


@pytest.mark.parametrize(
    ("batch", "field"),
    [
        ({"nodes": [{**SVC, "name": "nul \u0000 name"}]}, "name"),
        ({"nodes": [{**SVC, "properties": {"k\u0000": 1}}]}, "properties"),
        ({"nodes": [{**SVC, "properties": {"k": "v\u0000"}}]}, "properties"),
        ({"nodes": [{**SVC, "properties": {"k": "\ud800"}}]}, "properties"),
        (
            {
                "nodes": [
                    {
                        **SVC,
                        "properties": {
                            "k": {
                                "a": {
                                    "b": {
                                        "c": {
                                            "d": {
                                                "e": {
                                                    "f": {
                                                        "g": {
                                                            "h": {
                                                                "i": {
                                                                    "j": {
                                                                        "k": {
                                                                            "l": {
                                                                                "m": {
                                                                                    "n": {
                                                                                        "o": {
                                                                                            "p": 1
                                                                                        }
                                                                                    }
                                                                                }
                                                                            }
                                                                        }
                                                                    }
                                                                }
                                                            }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        },
                    }
                ]
            },
            "properties",
        ),
        ({"nodes": [{**SVC, "valid_at": "2026-11-29T10:00:00"}]}, "valid_at"),
        ({"nodes": [{**SVC, "valid_at": "0001-01-01T00:00:00+23:59"}]}, "valid_at"),
        ({"nodes": [], "sync": "yes"}, "sync"),
    ],
)
def test_hostile_topology_batches_get_a_4xx(
    gateway: Gateway, tenant: str, batch: dict[str, Any], field: str
) -> None:
    reply = gateway.admin(tenant, "POST", "/v1/admin/topology", batch)
    _assert_4xx_naming(reply, field)


def test_nan_and_infinity_in_properties_get_a_4xx(gateway: Gateway, tenant: str) -> None:
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        raw = b'{"nodes": [{"node_type": "Service", "external_id": "a", "properties": {"x": '
        reply = _raw_admin(gateway, tenant, "/v1/admin/topology", raw + constant + b"}}]}")
        _assert_4xx_naming(reply, "body")


def test_a_sync_with_a_string_true_does_not_close_the_namespace(
    gateway: Gateway, tenant: str
) -> None:
    assert gateway.admin(tenant, "POST", "/v1/admin/topology", {"nodes": [SVC]}).status == 200
    refused = gateway.admin(tenant, "POST", "/v1/admin/topology", {"nodes": [], "sync": "yes"})
    assert refused.status == 422
    assert refused.body["field"] == "sync"
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    still = gateway.request(
        "GET",
        "/v1/topology/criticality?type=Service&id=checkout",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert still.status == 200, still.body


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("type=Service&id=%00", "external_id"),
        ("type=Service&id=a&as_of=9999-12-31T23:59:59-23:59", "as_of"),
        ("type=Service&id=a&as_of=2026-11-29T10:00:00", "as_of"),
        ("type=Serv%00ice&id=a", "node_type"),
    ],
)
def test_hostile_topology_reads_get_a_4xx(
    gateway: Gateway, tenant: str, query: str, field: str
) -> None:
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    for route in ("blast-radius", "criticality"):
        reply = gateway.request(
            "GET", f"/v1/topology/{route}?{query}", headers={"Authorization": f"Bearer {token}"}
        )
        _assert_4xx_naming(reply, field)


@pytest.mark.parametrize(
    "key", ["k" * 256, "has\x00nul", "x" * 288], ids=["256 chars", "nul", "288 chars"]
)
def test_hostile_idempotency_keys_get_a_4xx_and_store_nothing(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any], key: str
) -> None:
    reply = gateway.admin(
        tenant, "POST", "/v1/admin/entries", ENTRY, headers={"Idempotency-Key": key}
    )
    _assert_4xx_naming(reply, "Idempotency-Key")
    assert _events(admin_conn, tenant) == 0


def test_the_idempotency_key_is_signed(gateway: Gateway, tenant: str) -> None:
    # Given a request signed with one key, replayed by someone who swaps the header
    body = json.dumps(ENTRY).encode()
    headers = sign_admin_request(
        gateway.keys[f"{tenant}-admin"], "POST", "/v1/admin/entries", body, idempotency_key="a"
    )
    swapped = {**headers, "Idempotency-Key": "b", "Content-Type": "application/json"}
    assert gateway.request("POST", "/v1/admin/entries", body, swapped).status == 401
    removed = {k: v for k, v in headers.items() if k != "Idempotency-Key"}
    assert gateway.request("POST", "/v1/admin/entries", body, removed).status == 401
    # and the untouched request goes through
    intact = {**headers, "Content-Type": "application/json"}
    assert gateway.request("POST", "/v1/admin/entries", body, intact).status == 201


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e["detail"].update(incident_id="INC-\u0000"), "incident_id"),
        (lambda e: e["detail"]["findings"][0].update(title="\ud800"), "title"),
    ],
)
def test_hostile_local_events_get_a_4xx_and_store_nothing(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    mutate: Any,
    field: str,
) -> None:
    event = incident_event(tenant)
    mutate(event)
    _assert_4xx_naming(gateway.publish(event), field)
    for raw in (DEEP, BIG_INT, b"[1, 2]", b"not json"):
        _assert_4xx_naming(gateway.door("/local/events", raw), "body")
        _assert_4xx_naming(gateway.door("/local/backfill", raw), "body")
    assert _events(admin_conn, tenant) == 0


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/xml", 415),
        (";", 415),
        (";application/json", 415),
        ("multipart/form-data; boundary=x", 415),
        ("application/x-www-form-urlencoded", 415),
        ("APPLICATION/JSON", 201),
        ("application/json; charset=utf-8", 201),
    ],
)
def test_a_body_that_is_not_declared_json_is_refused_and_stores_nothing(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    content_type: str,
    status: int,
) -> None:
    raw = json.dumps(ENTRY).encode()
    signed = sign_admin_request(gateway.keys[f"{tenant}-admin"], "POST", "/v1/admin/entries", raw)
    reply = gateway.request(
        "POST", "/v1/admin/entries", raw, {"Content-Type": content_type, **signed}
    )
    assert reply.status == status, reply.body
    assert _events(admin_conn, tenant) == (1 if status == 201 else 0)
    query = gateway.request(
        "POST",
        "/v1/memory/query",
        json.dumps({"topic": "the log volume filled up with debug output"}).encode(),
        {
            "Authorization": f"Bearer {mint_query_token(gateway.keys[f'{tenant}-query'])}",
            "Content-Type": content_type,
        },
    )
    assert query.status == (200 if status == 201 else 415), query.body


def test_a_multipart_topology_batch_cannot_sync_a_namespace_away(
    gateway: Gateway, tenant: str
) -> None:
    assert gateway.admin(tenant, "POST", "/v1/admin/topology", {"nodes": [SVC]}).status == 200
    raw = json.dumps({"nodes": [], "sync": True}).encode()
    path = "/v1/admin/topology"
    signed = sign_admin_request(gateway.keys[f"{tenant}-admin"], "POST", path, raw)
    reply = gateway.request(
        "POST", path, raw, {"Content-Type": "multipart/form-data; boundary=x", **signed}
    )
    assert reply.status == 415


def test_a_content_length_in_other_digits_gets_a_400(gateway: Gateway) -> None:
    import socket

    with socket.create_connection((gateway.host, gateway.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/admin/entries HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n{}")
        assert sock.recv(4096).startswith(b"HTTP/1.0 400")


def test_an_event_of_another_source_is_refused(gateway: Gateway, tenant: str) -> None:
    event = incident_event(tenant)
    event["source"] = "evil"
    reply = gateway.publish(event)
    assert reply.status == 400
    assert "source" in reply.body["message"]


def test_a_second_content_type_that_is_not_json_is_refused(gateway: Gateway, tenant: str) -> None:
    import socket

    raw = json.dumps(ENTRY).encode()
    signed = sign_admin_request(gateway.keys[f"{tenant}-admin"], "POST", "/v1/admin/entries", raw)
    lines = [
        "POST /v1/admin/entries HTTP/1.1",
        "Host: local",
        f"User-Agent: {user_agent('e2e-tests')}",
        "Content-Type: text/plain",
        "Content-Type: application/json",  # API Gateway's single-value headers keep this one
        f"Content-Length: {len(raw)}",
        *(f"{name}: {value}" for name, value in signed.items()),
    ]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + raw
    with socket.create_connection((gateway.host, gateway.port), timeout=10) as sock:
        sock.sendall(request)
        assert sock.recv(4096).startswith(b"HTTP/1.0 415")
