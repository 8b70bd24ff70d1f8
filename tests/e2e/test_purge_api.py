"""Offboarding over the signed admin API (issue 25, item 8): a purge is requested, then
confirmed with the token the request returned, signed by the same key, within 10
minutes; a stale, forged or another key's token is a clear 4xx and deletes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from grandbo.api.auth import SigningKey, mint_purge_confirmation, new_secret, rows_digest
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.runtime.lambda_container import install_runtime
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway, start_gateway

ENTRY = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked connections until the pool ran dry and "
    "requests timed out waiting for one.",
}


@pytest.fixture
def two_admins(
    database: DatabaseUrls, tenant: str, other_tenant: str, provider: FakeEmbeddingProvider
) -> Iterator[Gateway]:
    second = SigningKey(
        key_id=f"{tenant}-admin-2", tenant_id=tenant, secret=new_secret(), roles=["admin"]
    )
    gateway, server = start_gateway(
        database, (tenant, other_tenant), provider, extra_keys=(second,)
    )
    yield gateway
    server.shutdown()
    server.server_close()
    gateway.runtime.close()
    install_runtime(None)


def test_a_purge_is_requested_then_confirmed_by_the_same_key_in_time(
    two_admins: Gateway, tenant: str, other_tenant: str
) -> None:
    gateway = two_admins
    entry_id = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]["entry_id"]
    theirs = gateway.admin(other_tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]

    wrong = gateway.admin(tenant, "POST", "/v1/admin/purge", {"organization": other_tenant})
    assert (wrong.status, wrong.body["field"]) == (400, "organization")
    asked = gateway.admin(tenant, "POST", "/v1/admin/purge", {"organization": tenant})
    assert asked.status == 200, asked.body
    assert asked.body["rows"]["org_memory_entries"] == 1
    assert asked.body["confirm_within_s"] == 600
    token = asked.body["confirmation"]

    key = gateway.keys[f"{tenant}-admin"]
    digest = rows_digest(asked.body["rows"], asked.body["last_event_id"])
    stale = mint_purge_confirmation(key, digest, now=time.time() - 601)
    for bad in (
        stale,
        "gbp1.1.00",
        token + "0",
        mint_purge_confirmation(gateway.keys[f"{other_tenant}-admin"], digest),
    ):
        refused = gateway.admin(
            tenant, "POST", "/v1/admin/purge/confirmation", {"confirmation": bad}
        )
        assert (refused.status, refused.body["field"]) == (400, "confirmation"), bad
    # another admin key of the same organization cannot confirm this key's request
    other_key = f"{tenant}-admin-2"
    refused = gateway.request(
        "POST",
        "/v1/admin/purge/confirmation",
        *_signed(gateway, other_key, {"confirmation": token}),
    )
    assert refused.status == 400
    assert gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry_id}").status == 200

    body, headers = _signed(gateway, f"{tenant}-admin", {"confirmation": token})
    done = gateway.request("POST", "/v1/admin/purge/confirmation", body, headers)
    assert done.status == 200, done.body
    assert done.body["deleted"]["org_memory_entries"] == 1
    assert done.body["deleted"]["org_memory_events"] >= 1
    assert gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry_id}").status == 404
    still = gateway.admin(other_tenant, "GET", f"/v1/admin/entries/{theirs['entry_id']}")
    assert still.status == 200
    # break-it: the same signed confirmation sent again after new writes wiped them. The
    # nonce outlives the purge (a replay), and the token is spent once the organization
    # changed (a fresh signature)
    gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
    assert gateway.request("POST", "/v1/admin/purge/confirmation", body, headers).status == 401
    again = gateway.admin(tenant, "POST", "/v1/admin/purge/confirmation", {"confirmation": token})
    assert (again.status, again.body.get("field")) == (400, "confirmation"), again.body
    assert "changed" in again.body["message"]


def _signed(gateway: Gateway, key_id: str, payload: object) -> tuple[bytes, dict[str, str]]:
    import json

    from grandbo.api.auth import sign_admin_request

    body = json.dumps(payload).encode()
    headers = sign_admin_request(gateway.keys[key_id], "POST", "/v1/admin/purge/confirmation", body)
    return body, {"Content-Type": "application/json", **headers}
