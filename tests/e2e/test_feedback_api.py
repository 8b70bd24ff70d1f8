"""`POST /v1/memory/entries/{id}/feedback` and `GET /v1/admin/review` over HTTP."""

from __future__ import annotations

import json

from grandbo.api.auth import mint_query_token

from .conftest import Gateway

ENTRY = {
    "title": "PgBouncer pool exhausted on checkout",
    "summary": "Checkout requests waited for a database connection until they timed out.",
}


def feedback(gateway: Gateway, tenant: str, entry_id: str, body: object, **headers: str) -> object:
    token = mint_query_token(gateway.keys[f"{tenant}-query"])
    return gateway.request(
        "POST",
        f"/v1/memory/entries/{entry_id}/feedback",
        json.dumps(body).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers},
    )


def test_feedback_is_counted_once_per_verdict_and_listed_for_review(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    entry_id = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]["entry_id"]
    verdict = {"verdict": "misleading", "incident_id": "INC-1", "note": "the pool was fine"}
    first = feedback(gateway, tenant, entry_id, verdict)
    assert first.status == 201, first.body
    assert first.body["feedback"] == {"helpful": 0, "not_helpful": 0, "misleading": 1}
    retry = feedback(gateway, tenant, entry_id, verdict)
    assert (retry.status, retry.body["applied"]) == (200, False)
    second = feedback(gateway, tenant, entry_id, {**verdict, "incident_id": "INC-2"})
    assert second.body["feedback"]["misleading"] == 2
    for variant in (" INC-2", "INC-2 ", "\tINC-2\n"):  # one incident, whatever its spacing
        again = feedback(gateway, tenant, entry_id, {**verdict, "incident_id": variant})
        assert (again.status, again.body["feedback"]["misleading"]) == (200, 2), variant
    keyed = feedback(
        gateway,
        tenant,
        entry_id,
        {**verdict, "incident_id": "INC-2"},
        **{"Idempotency-Key": "beacon-run-9"},
    )
    assert keyed.status == 201  # the caller's own key: a distinct verdict
    review = gateway.admin(tenant, "GET", "/v1/admin/review")
    assert review.status == 200
    assert [e["entry_id"] for e in review.body["entries"]] == [entry_id]
    assert review.body["entries"][0]["misleading_count"] == 3

    # nothing of another organization, nothing without a token, nothing malformed
    assert feedback(gateway, other_tenant, entry_id, verdict).status == 404
    assert gateway.admin(other_tenant, "GET", "/v1/admin/review").body["entries"] == []
    no_token = gateway.request(
        "POST",
        f"/v1/memory/entries/{entry_id}/feedback",
        json.dumps(verdict).encode(),
        {"Content-Type": "application/json"},
    )
    assert no_token.status == 401
    for bad in (
        {"verdict": "great", "incident_id": "I"},
        {"verdict": "helpful"},
        {**verdict, "extra": 1},
        {**verdict, "note": "n" * 2001},
        [verdict],
    ):
        reply = feedback(gateway, tenant, entry_id, bad)
        assert reply.status in (400, 422), (bad, reply.status)
    assert feedback(gateway, tenant, "not-a-uuid", verdict).status in (400, 422)
    entry = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry_id}").body
    assert entry["misleading_count"] == 3  # nothing partial from the refused ones


def test_the_health_route_reports_the_callers_organization_only(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    entry_id = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]["entry_id"]
    for n in range(2):
        feedback(gateway, tenant, entry_id, {"verdict": "misleading", "incident_id": f"I{n}"})
    mine = gateway.admin(tenant, "GET", "/v1/admin/health")
    assert mine.status == 200
    assert mine.body["tenant_id"] == tenant
    assert mine.body["healthy"] is False
    assert [f["check"] for f in mine.body["findings"]] == ["misleading"]
    theirs = gateway.admin(other_tenant, "GET", "/v1/admin/health")
    assert (theirs.body["tenant_id"], theirs.body["healthy"], theirs.body["findings"]) == (
        other_tenant,
        True,
        [],
    )
    assert gateway.request("GET", "/v1/admin/health").status == 401  # unsigned
