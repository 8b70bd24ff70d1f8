"""`POST /v1/memory/entries/{id}/feedback` and `GET /v1/admin/review` over HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from grandbo.api.auth import SigningKey, mint_query_token, new_secret
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.runtime.lambda_container import install_runtime
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway, start_gateway

ENTRY = {
    "title": "PgBouncer pool exhausted on checkout",
    "summary": "Checkout requests waited for a database connection until they timed out.",
}


@pytest.fixture
def gateway(
    database: DatabaseUrls, tenant: str, other_tenant: str, provider: FakeEmbeddingProvider
) -> Iterator[Gateway]:
    """The tenant has two query callers here (two investigators' keys)."""
    second = SigningKey(
        key_id=f"{tenant}-query-2", tenant_id=tenant, secret=new_secret(), roles=["query"]
    )
    gw, server = start_gateway(database, (tenant, other_tenant), provider, extra_keys=(second,))
    yield gw
    server.shutdown()
    server.server_close()
    gw.runtime.close()
    install_runtime(None)


def feedback(
    gateway: Gateway,
    tenant: str,
    entry_id: str,
    body: object,
    *,
    caller: str | None = None,
    **headers: str,
) -> object:
    token = mint_query_token(gateway.keys[caller or f"{tenant}-query"])
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
    # issue 24, item 5: a key of its own no longer makes the same caller's verdict on the
    # same incident count again, nor does another verdict: the first stands
    assert (keyed.status, keyed.body["feedback"]["misleading"]) == (200, 2)
    changed = feedback(gateway, tenant, entry_id, {**verdict, "verdict": "helpful"})
    assert (changed.status, changed.body["feedback"]) == (
        200,
        {"helpful": 0, "not_helpful": 0, "misleading": 2},
    )
    # one caller naming two incidents (made up or not) puts nothing on the review list
    assert gateway.admin(tenant, "GET", "/v1/admin/review").body["entries"] == []
    other = feedback(
        gateway, tenant, entry_id, {**verdict, "incident_id": "INC-3"}, caller=f"{tenant}-query-2"
    )
    assert other.status == 201
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
        {**verdict, "note": "n" * 501},
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
    for n, caller in enumerate((f"{tenant}-query", f"{tenant}-query-2")):
        verdict = {"verdict": "misleading", "incident_id": f"I{n}"}
        feedback(gateway, tenant, entry_id, verdict, caller=caller)
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


def test_one_caller_flooding_verdicts_gets_429_with_retry_after(
    gateway: Gateway, tenant: str
) -> None:
    """Issue 24, item 5: one token wrote 2,411 verdicts in 20 s. Past FEEDBACK_RATE in its
    window a caller gets 429 with Retry-After; a retry of a counted verdict is still the
    no-op it was, and another caller is not held back."""
    from grandbo.memory.service import FEEDBACK_RATE

    entry_id = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]["entry_id"]
    for n in range(FEEDBACK_RATE.limit):
        reply = feedback(gateway, tenant, entry_id, {"verdict": "helpful", "incident_id": f"F{n}"})
        assert reply.status == 201, (n, reply.body)
    conn = http.client.HTTPConnection(gateway.host, gateway.port, timeout=30)
    try:
        conn.request(
            "POST",
            f"/v1/memory/entries/{entry_id}/feedback",
            body=json.dumps({"verdict": "helpful", "incident_id": "F-over"}),
            headers={
                "Authorization": f"Bearer {mint_query_token(gateway.keys[f'{tenant}-query'])}",
                "Content-Type": "application/json",
                "User-Agent": "grandbo/test (feedback)",
            },
        )
        flood = conn.getresponse()
        body = json.loads(flood.read())
    finally:
        conn.close()
    assert flood.status == 429, body
    assert body["error"] == "too_many_requests"
    assert 1 <= int(flood.headers["Retry-After"]) <= FEEDBACK_RATE.window_s
    retry = feedback(gateway, tenant, entry_id, {"verdict": "helpful", "incident_id": "F0"})
    assert (retry.status, retry.body["applied"]) == (200, False)
    other = feedback(
        gateway,
        tenant,
        entry_id,
        {"verdict": "helpful", "incident_id": "F-other"},
        caller=f"{tenant}-query-2",
    )
    assert other.status == 201
    entry = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry_id}").body
    assert entry["helpful_count"] == FEEDBACK_RATE.limit + 1


def test_one_key_through_the_api_and_the_mcp_server_is_one_caller(
    gateway: Gateway, tenant: str
) -> None:
    """A key's verdicts through HTTP and through the MCP tool count as one caller: two
    made-up incidents, one per door, put nothing on the review list (break-it finding)."""
    from uuid import UUID

    from grandbo.agent.backends import StoreBackend
    from grandbo.memory.domain.models import Feedback

    entry_id = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY).body["entry"]["entry_id"]
    assert feedback(gateway, tenant, entry_id, {"verdict": "misleading", "incident_id": "A"})
    key_id = gateway.keys[f"{tenant}-query"].key_id
    counts = StoreBackend(gateway.runtime).feedback(
        tenant, key_id, UUID(entry_id), Feedback(verdict="misleading", incident_id="B")
    )
    assert counts.misleading == 2
    assert gateway.admin(tenant, "GET", "/v1/admin/review").body["entries"] == []


def test_an_admin_removes_a_verdict_and_another_organization_cannot(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    """Issue 50: `POST /v1/admin/verdicts/{id}/removal`, with its reason, uncounts a
    verdict and lists it removed (who, when, why); another organization's admin is
    answered 404, as for a verdict that does not exist."""
    reply = gateway.admin(tenant, "POST", "/v1/admin/entries", ENTRY)
    entry_id = reply.body["entry"]["entry_id"]
    gateway.drain()
    topic = "checkout requests time out waiting for a database connection"
    assert gateway.query(tenant, {"topic": topic, "incident_id": "INC-R"}).status == 200
    judged = feedback(gateway, tenant, entry_id, {"verdict": "helpful", "incident_id": "INC-R"})
    assert judged.status == 201, judged.body  # type: ignore[attr-defined]

    def listed() -> dict[str, object]:
        page = gateway.admin(tenant, "POST", "/v1/admin/retrievals", {"incident_id": "INC-R"})
        assert page.status == 200, page.body
        (verdict,) = page.body["verdicts"]
        return dict(verdict)

    verdict = listed()
    assert verdict["removal"] is None
    path = f"/v1/admin/verdicts/{verdict['verdict_id']}/removal"

    no_reason = gateway.admin(tenant, "POST", path, {"reason": ""})
    assert no_reason.status == 422, no_reason.body
    theirs = gateway.admin(other_tenant, "POST", path, {"reason": "not ours"})
    assert theirs.status == 404, theirs.body
    assert (
        gateway.admin(
            tenant, "POST", "/v1/admin/verdicts/99999999999/removal", {"reason": "no such verdict"}
        ).status
        == 404
    )

    removed = gateway.admin(tenant, "POST", path, {"reason": "given by a leaked key"})

    assert removed.status == 200, removed.body
    assert removed.body["applied"] is True
    assert removed.body["entry_id"] == entry_id
    assert removed.body["removal"]["reason"] == "given by a leaked key"
    actor = gateway.admin(tenant, "GET", "/v1/admin/whoami").body["actor"]
    assert removed.body["removal"]["actor"] == actor
    assert listed()["removal"] == removed.body["removal"]
    entry = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry_id}").body
    assert entry["helpful_count"] == 0
    again = gateway.admin(tenant, "POST", path, {"reason": "once more"})
    assert (again.status, again.body["applied"]) == (200, False)
    assert again.body["removal"] == removed.body["removal"]
