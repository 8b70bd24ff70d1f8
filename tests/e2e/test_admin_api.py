"""The signed admin endpoint over HTTP: every bad signature is a 401, never a 500."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from grandbo.api.auth import sign_admin_request

from .conftest import Gateway

PATH = "/v1/admin/entries"
ENTRY = {
    "title": "WAL volume filled on the orders primary",
    "summary": "Replication slot of a dead replica pinned WAL until the orders volume filled.",
    "service": "orders-db",
}


def _signed(gateway: Gateway, tenant: str, body: bytes, **overrides: Any) -> dict[str, str]:
    headers = sign_admin_request(gateway.keys[f"{tenant}-admin"], "POST", PATH, body, **overrides)
    return {"Content-Type": "application/json", **headers}


def test_a_valid_signature_creates_the_entry(gateway: Gateway, tenant: str) -> None:
    reply = gateway.admin(tenant, "POST", PATH, ENTRY)
    assert reply.status == 201
    assert reply.body["applied"] is True
    assert reply.body["entry"]["tenant_id"] == tenant
    assert reply.body["entry"]["origin"] == "admin"
    assert reply.body["embed_enqueued"] is True


def test_an_idempotency_key_makes_a_retry_a_no_op(gateway: Gateway, tenant: str) -> None:
    first = gateway.admin(tenant, "POST", PATH, ENTRY, headers={"Idempotency-Key": "create-1"})
    retry = gateway.admin(tenant, "POST", PATH, ENTRY, headers={"Idempotency-Key": "create-1"})
    assert (first.status, retry.status) == (201, 200)
    assert retry.body["applied"] is False
    assert retry.body["entry"]["entry_id"] == first.body["entry"]["entry_id"]


def _tamper(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    headers = _signed(gateway, tenant, body)
    return json.dumps({**ENTRY, "title": "Tampered title here"}).encode(), headers


def _expired(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    return body, _signed(gateway, tenant, body, now=time.time() - 301)


def _future(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    # beyond the window by a margin: the request takes time to arrive, the check is exact
    return body, _signed(gateway, tenant, body, now=time.time() + 330)


def _unknown_key(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    return body, {**_signed(gateway, tenant, body), "x-grandbo-key-id": "nobody"}


def _query_key(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    headers = sign_admin_request(gateway.keys[f"{tenant}-query"], "POST", PATH, body)
    return body, {"Content-Type": "application/json", **headers}


def _missing_header(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    headers = _signed(gateway, tenant, body)
    del headers["x-grandbo-nonce"]
    return body, headers


def _non_ascii_signature(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    return body, {**_signed(gateway, tenant, body), "x-grandbo-signature": "é" * 64}


def _garbage_timestamp(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(ENTRY).encode()
    return body, {**_signed(gateway, tenant, body), "x-grandbo-timestamp": "1e99"}


def _no_headers(gateway: Gateway, tenant: str) -> tuple[bytes, dict[str, str]]:
    return json.dumps(ENTRY).encode(), {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    "forge",
    [
        _tamper,
        _expired,
        _future,
        _unknown_key,
        _query_key,
        _missing_header,
        _non_ascii_signature,
        _garbage_timestamp,
        _no_headers,
    ],
)
def test_bad_signatures_get_401_and_store_nothing(
    gateway: Gateway, tenant: str, forge: Any
) -> None:
    body, headers = forge(gateway, tenant)
    reply = gateway.request("POST", PATH, body, headers)
    assert reply.status == 401
    assert reply.body == {"error": "unauthorized", "message": "the request is not authenticated"}
    assert gateway.queue.jobs.qsize() == 0


def test_a_replayed_nonce_gets_401(gateway: Gateway, tenant: str) -> None:
    body = json.dumps(ENTRY).encode()
    headers = _signed(gateway, tenant, body)
    assert gateway.request("POST", PATH, body, headers).status == 201
    replay = gateway.request("POST", PATH, body, headers)
    assert replay.status == 401
    # the 401 says what happened (issue 34, point 12); a bad signature still says nothing
    assert replay.body["error"] == "replayed"
    assert "sign it again" in replay.body["message"]
    forged = {**_signed(gateway, tenant, body), "X-Grandbo-Signature": "0" * 64}
    wrong = gateway.request("POST", PATH, body, forged)
    assert (wrong.status, wrong.body["error"]) == (401, "unauthorized")


def test_after_a_correction_the_old_vector_is_never_served(gateway: Gateway, tenant: str) -> None:
    created = gateway.admin(tenant, "POST", PATH, ENTRY).body["entry"]
    gateway.drain()
    topic = "replication slot of a dead replica pinned WAL and the volume filled"
    before = gateway.query(tenant, {"topic": topic}).body["hits"][0]
    assert before["why"]["vector_rank"] == 1

    corrected = gateway.admin(
        tenant,
        "POST",
        f"{PATH}/{created['entry_id']}/corrections",
        {
            "title": "Kafka consumer lag",
            "summary": "Consumers fell behind after a rebalance and kafka lag grew for hours.",
            "expected_revision": 1,
        },
    )
    assert corrected.status == 201
    assert corrected.body["entry"]["revision"] == 2
    during = gateway.query(tenant, {"topic": topic}).body
    # the old text's vector is gone; nothing matches the old topic by vector any more
    assert during["metadata"]["vector_candidates"] == 0
    assert during["metadata"]["active_entries_without_current_vector"] == 1

    gateway.drain()
    lag = gateway.query(tenant, {"topic": "kafka consumers fell behind after a rebalance"}).body
    assert lag["hits"][0]["why"]["vector_rank"] == 1
    assert lag["hits"][0]["revision"] == 2


def test_retire_then_correct_conflicts(gateway: Gateway, tenant: str) -> None:
    created = gateway.admin(tenant, "POST", PATH, ENTRY).body["entry"]
    retired = gateway.admin(
        tenant, "POST", f"{PATH}/{created['entry_id']}/retirement", {"reason": "duplicate"}
    )
    assert retired.status == 200
    assert retired.body["entry"]["status"] == "retired"
    again = gateway.admin(
        tenant,
        "POST",
        f"{PATH}/{created['entry_id']}/corrections",
        {"title": "Too late now", "summary": "Retired already: " + ENTRY["summary"]},
    )
    assert again.status == 409


def test_stale_expected_revision_is_409_naming_the_field(gateway: Gateway, tenant: str) -> None:
    created = gateway.admin(tenant, "POST", PATH, ENTRY).body["entry"]
    reply = gateway.admin(
        tenant,
        "POST",
        f"{PATH}/{created['entry_id']}/corrections",
        {"title": "New title", "summary": ENTRY["summary"], "expected_revision": 3},
    )
    assert reply.status == 409
    assert reply.body["field"] == "expected_revision"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"summary": ENTRY["summary"]}, "title"),
        ({"title": "", "summary": ENTRY["summary"]}, "title"),
        ({"title": "ok title", "summary": "nul \u0000 here"}, "summary"),
        ({"title": 5, "summary": ENTRY["summary"]}, "title"),
        ({**ENTRY, "service": "has spaces in it"}, "service"),
        ({**ENTRY, "owner": "extra field"}, "owner"),
        ({**ENTRY, "tags": ["ok", 7]}, "tags.1"),
    ],
)
def test_bad_admin_input_is_4xx_naming_the_field(
    gateway: Gateway, tenant: str, payload: dict[str, Any], field: str
) -> None:
    reply = gateway.admin(tenant, "POST", PATH, payload)
    assert reply.status in (400, 422)
    assert reply.body["field"] == field
    assert gateway.queue.jobs.qsize() == 0


def test_unknown_entries_are_404(gateway: Gateway, tenant: str) -> None:
    reply = gateway.admin(tenant, "POST", f"{PATH}/{uuid.uuid4()}/retirement", {"reason": "x"})
    assert reply.status == 404
    assert gateway.admin(tenant, "GET", f"{PATH}/not-a-uuid").status == 422


def test_two_admin_keys_of_one_tenant_never_share_an_idempotency_key(
    database: Any, tenant: str
) -> None:
    from grandbo.api.auth import SigningKey, new_secret
    from grandbo.embedding.fake import FakeEmbeddingProvider
    from grandbo.runtime.lambda_container import install_runtime

    from .conftest import start_gateway

    second = SigningKey(
        key_id=f"{tenant}-tool", tenant_id=tenant, secret=new_secret(), roles=["admin"]
    )
    gateway, server = start_gateway(
        database, (tenant,), FakeEmbeddingProvider(), extra_keys=(second,)
    )
    try:
        first = gateway.admin(tenant, "POST", PATH, ENTRY, headers={"Idempotency-Key": "k1"})
        other = {**ENTRY, "title": "Another tool's lesson"}
        raw = json.dumps(other).encode()
        signed = sign_admin_request(second, "POST", PATH, raw, idempotency_key="k1")
        reply = gateway.request("POST", PATH, raw, {"Content-Type": "application/json", **signed})
        assert (first.status, reply.status) == (201, 201)
        assert reply.body["entry"]["title"] == "Another tool's lesson"
        assert reply.body["entry"]["entry_id"] != first.body["entry"]["entry_id"]
    finally:
        server.shutdown()
        server.server_close()
        gateway.runtime.close()
        install_runtime(None)


def test_a_correction_keeps_what_it_does_not_name(gateway: Gateway, tenant: str) -> None:
    """Issue 34, point 9: a correction without `service` erased it."""
    created = gateway.admin(tenant, "POST", PATH, {**ENTRY, "service": "orders-db"}).body["entry"]
    path = f"{PATH}/{created['entry_id']}/corrections"
    summary = ENTRY["summary"] + " The slot is now dropped with the replica."
    reply = gateway.admin(tenant, "POST", path, {"summary": summary})
    assert reply.status == 201, reply.body
    kept = reply.body["entry"]
    assert (kept["title"], kept["summary"], kept["service"]) == (
        ENTRY["title"],
        summary,
        "orders-db",
    )
    assert kept["origin"] == "admin"
    cleared = gateway.admin(tenant, "POST", path, {"service": None})
    assert cleared.status == 201
    assert cleared.body["entry"]["service"] is None
    assert gateway.admin(tenant, "POST", path, {}).status == 400
