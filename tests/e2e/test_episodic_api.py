"""Episodic entries through the admin API: created with `kind`, promoted, the lifetime set."""

from __future__ import annotations

from .conftest import Gateway

ROLLBACK = {
    "title": "Deploy 4812 rolled back",
    "summary": "The payments deploy 4812 was rolled back after checkout errors spiked.",
    "kind": "episodic",
}


def test_episodic_entries_through_the_admin_api(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    answered = gateway.admin(tenant, "POST", "/v1/admin/settings", {"episodic_ttl_days": 7})
    assert answered.body["episodic_ttl_days"] == 7  # the settings in force are answered
    for bad in ({"episodic_ttl_days": 0}, {"episodic_ttl_days": "7"}, {}, {"other": 1}):
        assert gateway.admin(tenant, "POST", "/v1/admin/settings", bad).status == 422, bad
    created = gateway.admin(tenant, "POST", "/v1/admin/entries", ROLLBACK)
    assert created.status == 201
    entry = created.body["entry"]
    assert entry["kind"] == "episodic"
    assert entry["expires_at"] is not None
    bad_kind = gateway.admin(tenant, "POST", "/v1/admin/entries", {**ROLLBACK, "kind": "forever"})
    assert bad_kind.status == 422
    path = f"/v1/admin/entries/{entry['entry_id']}/promotion"
    assert gateway.admin(other_tenant, "POST", path).status == 404  # not theirs
    promoted = gateway.admin(tenant, "POST", path)
    assert promoted.status == 200
    assert promoted.body["applied"] is True
    assert (promoted.body["entry"]["kind"], promoted.body["entry"]["expires_at"]) == (
        "durable",
        None,
    )
