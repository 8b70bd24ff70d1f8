"""The retrieval log and the queries that fill it are bounded (issue 44, point 2): one
caller's queries per minute (a 429 with Retry-After past its organization's rate, counted
on the writer whichever door asks), and the log's rows per organization and day (the rest
counted, and shown by the audit the health page reads)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.errors import RateLimitedError
from grandbo.memory.curation.audit import audit
from grandbo.memory.curation.curator import Curation

from .conftest import Gateway
from .test_retrieval_log import _rows

TOPIC = "checkout requests time out waiting for a database connection from the pool"


def test_a_caller_past_its_organizations_rate_gets_a_429_with_retry_after(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    # Given an organization that allows 3 queries a minute per caller
    settings = gateway.admin(tenant, "POST", "/v1/admin/settings", {"query_rate_per_minute": 3})
    assert settings.status == 200, settings.body
    assert settings.body["query_rate_per_minute"] == 3

    # When one token asks 4 times within the minute
    replies = [gateway.query(tenant, {"topic": TOPIC}) for _ in range(4)]

    # Then the fourth is refused, saying when to come back; another organization is not
    assert [r.status for r in replies] in ([200, 200, 200, 429], [200, 200, 200, 200])
    if replies[-1].status == 200:  # the minute turned between them: ask again at once
        replies = [gateway.query(tenant, {"topic": TOPIC}) for _ in range(4)]
        assert [r.status for r in replies][-1] == 429
    refused = replies[-1]
    assert refused.body["error"] == "too_many_requests"
    assert "3 queries a minute" in refused.body["message"]
    # a sliding minute: until enough of the last minute's weight has faded (at most 2 min)
    assert 1 <= int(refused.headers["retry-after"]) <= 120
    assert gateway.query(other_tenant, {"topic": TOPIC}).status == 200


def test_a_rate_out_of_bounds_is_refused_naming_the_field(gateway: Gateway, tenant: str) -> None:
    for bad in (0, -1, 100_001, "600", 1.5, True):
        reply = gateway.admin(tenant, "POST", "/v1/admin/settings", {"query_rate_per_minute": bad})
        assert reply.status == 422, (bad, reply.body)
        assert reply.body["field"] == "query_rate_per_minute"


def test_the_log_keeps_its_bound_of_a_day_and_counts_what_it_drops(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # a day of 8 questions: one caller keeps at most a quarter of it (2)
    reply = gateway.admin(tenant, "POST", "/v1/admin/settings", {"retrieval_rows_per_day": 8})
    assert reply.status == 200, reply.body

    # one token floods: 5 questions, 2 kept
    for n in range(5):
        assert gateway.query(tenant, {"topic": TOPIC, "incident_id": f"INC-{n}"}).status == 200
    # and another caller's questions are still kept (the console's search, as its admin)
    for _ in range(2):
        assert gateway.admin(tenant, "POST", "/v1/admin/query", {"topic": TOPIC}).status == 200
    gateway.runtime.retrieval_writer.flush()

    assert _rows(admin_conn, tenant) == 4
    service = gateway.runtime.service()
    settings = Curation(service).settings(tenant)
    (today,) = settings.retrieval_days_logged
    assert (today.logged, today.dropped, today.unlogged) == (4, 3, 0)
    (flood,) = settings.retrieval_callers_dropped
    assert flood.caller == gateway.keys[f"{tenant}-query"].key_id
    assert (flood.logged, flood.dropped) == (2, 3)
    (finding,) = [f for f in audit(service, tenant).findings if f.check == "log_dropped"]
    assert finding.count == 3
    assert "dropped 3" in finding.detail
    assert f"{flood.caller} 3 on" in finding.detail


def test_one_caller_cannot_take_the_organizations_day(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """Issue 51's attack: one token at its rate filled the organization's day, and every
    other caller's question was dropped. Now it fills its quarter only."""
    reply = gateway.admin(tenant, "POST", "/v1/admin/settings", {"retrieval_rows_per_day": 20})
    assert reply.status == 200, reply.body
    for _ in range(25):  # the flood: five times its share
        assert gateway.query(tenant, {"topic": TOPIC}).status == 200
    for _ in range(5):  # then someone else asks
        assert gateway.admin(tenant, "POST", "/v1/admin/query", {"topic": TOPIC}).status == 200
    gateway.runtime.retrieval_writer.flush()
    callers = dict(
        admin_conn.execute(
            "SELECT caller, count(*) FROM org_memory_retrievals WHERE tenant_id = %s"
            " GROUP BY caller",
            (tenant,),
        ).fetchall()
    )
    assert callers[gateway.keys[f"{tenant}-query"].key_id] == 5
    assert sum(callers.values()) == 10  # the other caller's five, every one


def test_a_person_with_a_long_address_is_counted_by_its_digest(
    gateway: Gateway, tenant: str
) -> None:
    """Issue 44's review: a caller over the count's 200 characters (a person's address
    may be longer) is admitted and counted, never a 500."""
    service = gateway.runtime.service()
    long_caller = "person:" + "a" * 230 + "@example.com"
    service.set_log_bounds(tenant, query_rate_per_minute=3)
    admitted = 0

    def ask_until_refused() -> None:
        nonlocal admitted
        for _ in range(8):  # within two minutes' worth, whatever the clock
            gateway.runtime.admit(tenant, long_caller)
            admitted += 1

    with pytest.raises(RateLimitedError):
        ask_until_refused()
    assert admitted == 3  # a sliding minute: no edge lets more through
