"""Recurrences through the admin API: an admin's entry that repeats a lesson is merged
once embedded, listed on the lesson, split back out, and an entry marked never-merge."""

from __future__ import annotations

import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider

from .conftest import Gateway

LESSON = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
}
REWORDED = {
    "title": "Connection leak exhausted the checkout pool",
    "summary": "Requests timed out waiting for a connection: on a retry path the checkout "
    "service leaked database connections until the pool was exhausted.",
}
TOPIC = "checkout requests time out waiting for a database connection from the pool"


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider(duplicate_distance=0.05)


def test_a_recurrence_through_the_admin_api_is_merged_listed_and_split(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    first = gateway.admin(tenant, "POST", "/v1/admin/entries", LESSON).body["entry"]
    gateway.drain()
    second = gateway.admin(tenant, "POST", "/v1/admin/entries", REWORDED).body["entry"]
    gateway.drain()

    listed = gateway.admin(tenant, "GET", f"/v1/admin/entries/{first['entry_id']}/recurrences")
    assert listed.status == 200
    assert [e["entry_id"] for e in listed.body["entries"]] == [second["entry_id"]]
    assert listed.body["entries"][0]["status"] == "merged"
    other = gateway.admin(other_tenant, "GET", f"/v1/admin/entries/{first['entry_id']}/recurrences")
    assert other.status == 404
    hits = gateway.query(tenant, {"topic": TOPIC}).body["hits"]
    assert [(h["entry_id"], h["recurrences"]) for h in hits] == [(first["entry_id"], 2)]

    split_path = f"/v1/admin/entries/{second['entry_id']}/split"
    assert gateway.admin(other_tenant, "POST", split_path).status == 404
    split = gateway.admin(tenant, "POST", split_path)
    assert split.status == 200
    assert (split.body["entry"]["status"], split.body["entry"]["never_merge"]) == (
        "active",
        True,
    )
    again = gateway.admin(tenant, "POST", split_path)
    assert again.status == 409
    assert again.body["error"] == "not_a_recurrence"
    hits = gateway.query(tenant, {"topic": TOPIC}).body["hits"]
    assert {h["entry_id"] for h in hits} == {first["entry_id"], second["entry_id"]}
    assert all(h["recurrences"] == 1 for h in hits)


def test_the_merge_policy_route(gateway: Gateway, tenant: str) -> None:
    entry = gateway.admin(tenant, "POST", "/v1/admin/entries", LESSON).body["entry"]
    path = f"/v1/admin/entries/{entry['entry_id']}/merge-policy"
    for bad in ({}, {"never_merge": "yes"}, {"never_merge": 1}, {"never_merge": True, "x": 1}):
        assert gateway.admin(tenant, "POST", path, bad).status == 422, bad
    marked = gateway.admin(tenant, "POST", path, {"never_merge": True})
    assert (marked.status, marked.body["applied"], marked.body["entry"]["never_merge"]) == (
        200,
        True,
        True,
    )
    assert gateway.admin(tenant, "POST", path, {"never_merge": True}).body["applied"] is False
    gateway.drain()
    repeat = gateway.admin(tenant, "POST", "/v1/admin/entries", REWORDED).body["entry"]
    gateway.drain()
    got = gateway.admin(tenant, "GET", f"/v1/admin/entries/{repeat['entry_id']}")
    assert got.body["status"] == "active"
