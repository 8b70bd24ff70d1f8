"""Incident-closed events over the local runner: only corroborated findings become memory."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from .conftest import Gateway

TOPIC = "the payments database ran out of connections because a retry path leaked them"


def incident_event(tenant: str, incident_id: str = "INC-2001") -> dict[str, Any]:
    corroborated = [
        (
            "f1",
            "Connection leak in payments retry path",
            "The retry path opened a new database connection without closing the old one.",
        ),
        (
            "f2",
            "RDS max_connections reached",
            "The shared RDS instance hit max_connections and every service failed to connect.",
        ),
        (
            "f3",
            "No pool-level alarm",
            "Nothing alarmed on connection count until checkout errors paged the on-call.",
        ),
    ]
    hypotheses = [
        ("h1", "hypothesis", "Maybe a network partition", "Suspected but never shown."),
        ("h2", "rejected", "Bad deploy of checkout", "Ruled out: no deploy in the window."),
    ]
    findings = [
        {"finding_id": fid, "status": "corroborated", "title": t, "summary": s}
        for fid, t, s in corroborated
    ] + [
        {"finding_id": fid, "status": st, "title": t, "summary": s} for fid, st, t, s in hypotheses
    ]
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "IncidentClosed",
        "source": "landfall.incidents",
        "account": "123456789012",
        "time": "2026-11-29T10:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "tenant_id": tenant,
            "incident_id": incident_id,
            "title": "Checkout errors",
            "service": "payments",
            "closed_at": "2026-11-29T09:55:00Z",
            "findings": findings,
            "chatter": [
                {"author": f"eng{i}", "text": f"anyone seeing this? {i}"} for i in range(5)
            ],
        },
    }


def _count(admin_conn: psycopg.Connection[Any], table: str, tenant: str) -> int:
    row = admin_conn.execute(
        f"SELECT count(*) FROM {table} WHERE tenant_id = %s",  # noqa: S608 - fixed table names
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_only_corroborated_findings_become_entries_found_lexically_then_by_vector(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    reply = gateway.publish(incident_event(tenant))
    assert reply.status == 200
    assert reply.body["created"] == 3
    assert _count(admin_conn, "org_memory_entries", tenant) == 3
    titles = {
        row[0]
        for row in admin_conn.execute(
            "SELECT title FROM org_memory_entries WHERE tenant_id = %s", (tenant,)
        )
    }
    assert "Maybe a network partition" not in titles
    assert not any("anyone seeing this" in t for t in titles)

    at_once = gateway.query(tenant, {"topic": TOPIC, "limit": 5})
    assert at_once.status == 200
    assert len(at_once.body["hits"]) >= 2
    assert at_once.body["metadata"]["vector_candidates"] == 0
    assert at_once.body["metadata"]["active_entries_without_current_vector"] == 3
    assert all(hit["why"]["lexical_rank"] is not None for hit in at_once.body["hits"])

    gateway.drain()  # the embed worker runs on the SQS-shaped batch
    after = gateway.query(tenant, {"topic": TOPIC, "limit": 5})
    assert after.body["metadata"]["active_entries_without_current_vector"] == 0
    assert after.body["metadata"]["vector_candidates"] >= 1
    assert any(hit["why"]["vector_rank"] is not None for hit in after.body["hits"])


def test_redelivering_the_same_event_changes_nothing(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    first = gateway.publish(incident_event(tenant))
    again = gateway.publish(incident_event(tenant))
    assert again.status == 200
    assert again.body["created"] == 0
    assert again.body["entries"] == first.body["entries"]
    assert _count(admin_conn, "org_memory_events", tenant) == 3
    assert _count(admin_conn, "org_memory_entries", tenant) == 3
    assert gateway.queue.jobs.qsize() == 3  # the redelivery enqueued nothing new


def test_a_malformed_event_stores_nothing_and_fails_loudly(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    event = incident_event(tenant)
    event["detail"]["findings"][2]["summary"] = "nul \x00 byte"  # the third finding is bad
    reply = gateway.publish(event)
    # the function refused it (in AWS: sent to the incident DLQ at once, with the reason);
    # the local door answers 400 with the handler's own words, naming the finding
    assert reply.status == 400
    assert "findings[f3].summary" in reply.body["message"]
    assert _count(admin_conn, "org_memory_events", tenant) == 0

    event = incident_event("Not A Tenant!")
    reply = gateway.publish(event)
    assert reply.status == 400
    assert "tenant_id" in reply.body["message"]


def test_a_recalled_entry_the_organization_does_not_hold_refuses_the_event_whole(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    first = gateway.publish(incident_event(tenant, "INC-2002"))
    assert first.status == 200
    lesson = first.body["entries"][0]
    events = _count(admin_conn, "org_memory_events", tenant)
    stranger = "00000000-0000-4000-8000-000000000001"
    event = incident_event(tenant)
    event["detail"]["recalled"] = [
        {"entry_id": lesson, "outcome": "confirmed"},
        {"entry_id": stranger, "outcome": "refuted"},
    ]

    reply = gateway.publish(event)

    # a 400 naming the field (in AWS: the incident DLQ at once, with the reason), nothing
    # stored: neither the findings nor the verdict on the entry it does hold
    assert reply.status == 400
    assert "recalled.1.entry_id" in reply.body["message"]
    assert stranger in reply.body["message"]
    assert _count(admin_conn, "org_memory_events", tenant) == events

    del event["detail"]["recalled"][1]
    assert gateway.publish(event).status == 200
    assert gateway.publish(event).status == 200  # a redelivery: the verdict once
    verdicts = admin_conn.execute(
        "SELECT entry_id::text, actor, payload->>'verdict' FROM org_memory_events"
        " WHERE tenant_id = %s AND event_type = 'feedback_recorded'",
        (tenant,),
    ).fetchall()
    assert verdicts == [(lesson, "incident-closed:INC-2001", "helpful")]


def test_an_event_is_recorded_at_the_deployed_log_level(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The stack runs every function with POWERTOOLS_LOG_LEVEL=INFO (infra/functions.py),
    the suite at WARNING: at INFO the handler's own log line runs, and a field logging
    refuses ('created', a LogRecord attribute) made every delivery fail after its write
    committed (EventBridge retries, then the dead-letter queue)."""
    from grandbo.observability import logger

    level = logger.log_level
    logger.setLevel("INFO")
    try:
        reply = gateway.publish(incident_event(tenant))
    finally:
        logger.setLevel(level)
    assert reply.status == 200, reply.body
    assert reply.body["created"] == 3
    assert _count(admin_conn, "org_memory_entries", tenant) == 3
    recorded = [r for r in caplog.records if r.getMessage() == "incident recorded"]
    assert len(recorded) == 1
    assert recorded[0].entries_created == 3
