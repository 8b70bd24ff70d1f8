"""Thin entries over the local runner (issue 14, item 4): the signed admin API answers 400
naming `summary` and what is missing, the incident-closed door refuses the whole event, and
nothing is stored either way."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from .conftest import Gateway
from .test_incident_closed import incident_event

PATH = "/v1/admin/entries"
ENTRY = {
    "title": "WAL volume filled on the orders primary",
    "summary": "Replication slot of a dead replica pinned WAL until the orders volume filled.",
}
THIN = [
    pytest.param(
        {"title": "Deploy failed", "summary": "deploy failed again"}, "too short", id="short"
    ),
    pytest.param(
        {"title": "High latency", "summary": "latency was high, and then it was high again"},
        "2 distinct informative tags (high, latenc)",
        id="stopwords",
    ),
]


def _events(admin_conn: psycopg.Connection[Any], tenant: str) -> int:
    row = admin_conn.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(("thin", "missing"), THIN)
def test_a_thin_create_is_400_naming_what_is_missing(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    thin: dict[str, str],
    missing: str,
) -> None:
    reply = gateway.admin(tenant, "POST", PATH, thin, headers={"Idempotency-Key": "thin-1"})
    assert reply.status == 400
    assert reply.body["field"] == "summary"
    assert missing in reply.body["message"]
    assert _events(admin_conn, tenant) == 0
    assert gateway.queue.jobs.qsize() == 0
    # the refusal spent nothing: the same key with a real text creates the entry
    fixed = gateway.admin(tenant, "POST", PATH, ENTRY, headers={"Idempotency-Key": "thin-1"})
    assert fixed.status == 201


@pytest.mark.parametrize(("thin", "missing"), THIN)
def test_a_thin_correction_is_400_and_the_entry_keeps_its_revision(
    gateway: Gateway,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    thin: dict[str, str],
    missing: str,
) -> None:
    created = gateway.admin(tenant, "POST", PATH, ENTRY).body["entry"]
    path = f"{PATH}/{created['entry_id']}/corrections"
    reply = gateway.admin(tenant, "POST", path, {**thin, "expected_revision": 1})
    assert reply.status == 400
    assert reply.body["field"] == "summary"
    assert missing in reply.body["message"]
    stored = gateway.admin(tenant, "GET", f"{PATH}/{created['entry_id']}").body
    assert (stored["revision"], stored["summary"]) == (1, ENTRY["summary"])
    assert _events(admin_conn, tenant) == 1


def test_an_entry_just_above_the_minimum_is_created(gateway: Gateway, tenant: str) -> None:
    borderline = {"title": "Disk full", "summary": "WAL volume filled while the replica was down"}
    assert gateway.admin(tenant, "POST", PATH, borderline).status == 201


def test_an_incident_with_one_thin_finding_is_refused_whole(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    event = incident_event(tenant)
    event["detail"]["findings"][1]["summary"] = "max_connections reached"  # f2, corroborated
    reply = gateway.publish(event)
    assert reply.status == 400
    assert "findings[f2].summary: is too short" in reply.body["message"]
    assert _events(admin_conn, tenant) == 0
    assert gateway.publish(incident_event(tenant)).body["created"] == 3  # once it is fixed
