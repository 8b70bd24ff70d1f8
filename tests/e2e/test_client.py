"""The Python clients against the local runner: Beacon's query and the signed admin calls."""

from __future__ import annotations

import pytest

from grandbo.api.client import AdminClient, GrandboHTTPError, MemoryClient

from .conftest import Gateway


def test_beacon_and_admin_clients_round_trip(gateway: Gateway, tenant: str) -> None:
    base = f"http://{gateway.host}:{gateway.port}"
    admin = AdminClient(base, gateway.keys[f"{tenant}-admin"])
    beacon = MemoryClient.with_key(base, gateway.keys[f"{tenant}-query"])

    created = admin.create_entry(
        "Redis evicted session keys",
        "redis-sessions reached maxmemory with allkeys-lru and evicted session keys.",
        service="redis-sessions",
        idempotency_key="redis-1",
    )
    entry_id = created["entry"]["entry_id"]
    assert (
        admin.create_entry(
            "Redis evicted session keys",
            "Another text, the same key: the retry of the create changes nothing.",
            idempotency_key="redis-1",
        )["applied"]
        is False
    )
    gateway.drain()

    found = beacon.query_org_memory(
        "users were logged out because redis-sessions evicted their session keys", limit=3
    )
    assert found["hits"][0]["entry_id"] == entry_id
    assert beacon.get_entry(entry_id)["title"] == "Redis evicted session keys"

    corrected = admin.correct_entry(
        entry_id,
        "Redis evictions",
        "allkeys-lru evicted session keys once redis-sessions reached maxmemory.",
        expected_revision=1,
    )
    assert corrected["entry"]["revision"] == 2
    assert admin.retire_entry(entry_id, "merged into the runbook")["entry"]["status"] == "retired"
    assert admin.get_entry(entry_id)["status"] == "retired"

    with pytest.raises(GrandboHTTPError) as error:
        beacon.query_org_memory("checkout-api-slow-queries")
    assert error.value.status == 422
    assert error.value.body["field"] == "topic"
