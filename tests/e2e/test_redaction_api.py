"""`POST /v1/admin/entries/{id}/redaction` over HTTP (issue 25, item 1): signed, the
tombstone and the hashes in the answer, 410 with the tombstone afterwards, clear 4xx for
bad input, and nothing of another organization."""

from __future__ import annotations

import uuid

from grandbo.api.auth import mint_query_token

from .conftest import Gateway

ENTRY = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked connections until the pool ran dry; the "
    "password hunter2xq was pasted into the channel.",
}


def _path(entry_id: str) -> str:
    return f"/v1/admin/entries/{entry_id}/redaction"


def test_a_signed_redaction_leaves_a_tombstone_served_as_410(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    entry_id = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]["entry_id"]
    gateway.drain()
    # another organization cannot redact it, and bad bodies are refused, naming the field
    assert gateway.admin(other_tenant, "POST", _path(entry_id), {"reason": "x"}).status == 404
    for bad in ({}, {"reason": ""}, {"reason": "x", "keep_recurrences": "yes"}, {"why": "x"}):
        refused = gateway.admin(tenant, "POST", _path(entry_id), bad)
        assert refused.status == 422, (bad, refused.body)
    assert gateway.admin(tenant, "POST", _path(str(uuid.uuid4())), {"reason": "x"}).status == 404

    done = gateway.admin(tenant, "POST", _path(entry_id), {"reason": "credential pasted"})
    assert done.status == 200, done.body
    assert done.body["applied"] is True
    assert done.body["tombstone"]["reason"] == "credential pasted"
    assert all(len(r["sha256"]) == 64 for r in done.body["removed"])
    assert "hunter2xq" not in str(done.body)

    admin_read = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry_id}")
    assert admin_read.status == 410
    assert admin_read.body["tombstone"]["reason"] == "credential pasted"
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    query_read = gateway.request(
        "GET", f"/v1/memory/entries/{entry_id}", None, {"Authorization": f"Bearer {token}"}
    )
    assert query_read.status == 410
    found = gateway.query(tenant, {"topic": "checkout pool ran dry because connections leaked"})
    assert entry_id not in [hit["entry_id"] for hit in found.body["hits"]]
    # once redacted: another redaction is refused with the tombstone
    again = gateway.admin(tenant, "POST", _path(entry_id), {"reason": "again"})
    assert again.status == 410
