"""The curation routes at their edges (issue 26, red team): a suggested pair is offered
the way the merge route accepts it, a busy entry's history still shows its current
revision, and growth counts the same weeks whatever the database session's time zone."""

from __future__ import annotations

import threading
from uuid import UUID

import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.curation import curator as curation
from grandbo.memory.curation.curator import MAX_HISTORY_EVENTS, Curation
from grandbo.memory.domain.models import MAX_SUMMARY_CHARS, WriteContext
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.runtime.lambda_container import runtime
from grandbo.storage.connections import DatabaseUrls, connect

from .conftest import Gateway
from .test_curation_api import LOOK_ALIKE, POOL, TOPIC, _create


def _pairs(gateway: Gateway, tenant: str) -> list[tuple[str, str]]:
    found = gateway.admin(tenant, "GET", "/v1/admin/duplicates").body["pairs"]
    return [(p["canonical"]["entry_id"], p["recurrence"]["entry_id"]) for p in found]


def _correct(gateway: Gateway, tenant: str, entry: dict[str, object], title: str) -> None:
    path = f"/v1/admin/entries/{entry['entry_id']}/corrections"
    body = {k: entry[k] for k in ("summary", "service")} | {"title": title}
    assert gateway.admin(tenant, "POST", path, body).status == 201


def test_a_suggested_pair_is_one_the_merge_route_accepts(gateway: Gateway, tenant: str) -> None:
    older = _create(gateway, tenant, POOL)
    newer = _create(gateway, tenant, LOOK_ALIKE)
    # a person corrected the newer: it is never merged, but the older may be merged into it
    _correct(gateway, tenant, newer, LOOK_ALIKE["title"] + " again")
    gateway.drain()
    pairs = _pairs(gateway, tenant)
    assert pairs == [(newer["entry_id"], older["entry_id"])]
    canonical, recurrence = pairs[0]
    merged = gateway.admin(
        tenant, "POST", f"/v1/admin/entries/{recurrence}/merge", {"into": canonical}
    )
    assert merged.status == 200, merged.body  # the suggested merge is one the API makes

    split = gateway.admin(tenant, "POST", f"/v1/admin/entries/{recurrence}/split")
    assert split.status == 200  # never merged again: no longer suggested
    # both corrected: no merge either way, so no merge to suggest
    first = _create(gateway, tenant, {**POOL, "title": POOL["title"] + " in payments"})
    second = _create(gateway, tenant, {**LOOK_ALIKE, "title": LOOK_ALIKE["title"] + " in payments"})
    _correct(gateway, tenant, first, POOL["title"] + " in the payments path")
    _correct(gateway, tenant, second, LOOK_ALIKE["title"] + " in the payments path")
    gateway.drain()
    ids = {first["entry_id"], second["entry_id"]}
    assert [pair for pair in _pairs(gateway, tenant) if set(pair) <= ids] == []


def test_a_busy_entrys_history_shows_its_creation_and_its_latest_revision(
    gateway: Gateway, tenant: str
) -> None:
    entry = _create(gateway, tenant, POOL)
    service = runtime().service()
    for n in range(MAX_HISTORY_EVENTS + 1):  # feedback: one event each on the entry
        service.record_feedback(
            tenant,
            UUID(entry["entry_id"]),
            {"verdict": "helpful", "incident_id": f"INC-{n}"},
            WriteContext(actor=f"query:beacon-{n}", idempotency_key=f"query:edges:{n}"),
        )
    _correct(gateway, tenant, entry, "Checkout pool exhausted by a leaked connection on retry")
    reply = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry['entry_id']}/history")
    assert reply.status == 200
    events = reply.body["events"]
    assert len(events) == MAX_HISTORY_EVENTS
    assert events[0]["event_type"] == "entry_created"
    assert (events[-1]["event_type"], events[-1]["revision"]) == ("entry_corrected", 2)
    assert reply.body["omitted_events"] == MAX_HISTORY_EVENTS + 3 - MAX_HISTORY_EVENTS
    ids = [e["event_id"] for e in events]
    assert ids == sorted(ids)


def test_a_history_of_long_corrections_and_recurrences_fits_in_its_answer(
    gateway: Gateway, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long texts in another script, corrected again and again, with recurrences: the
    history lists the newest recurrences and the latest events that fit, counted as they
    are sent (non-ASCII as \\u escapes, inside Lambda's JSON envelope), and says how many
    it left out. At full size (500 corrections, 100 recurrences of 20,000 characters of
    "é") the answer would be about 19 MB: over Lambda's 6 MB and the console's 8 MiB, a
    page that could never load again. The budgets are made small here."""
    monkeypatch.setattr(curation, "MAX_HISTORY_ANSWER_BYTES", 400_000)
    monkeypatch.setattr(curation, "MAX_HISTORY_RECURRENCE_BYTES", 150_000)
    entry = _create(gateway, tenant, POOL)
    long_text = " ".join(f"fenêtre{i}-é" for i in range(1_500))[:MAX_SUMMARY_CHARS]
    for n in range(5):  # recurrences: each merged into the entry
        other = _create(gateway, tenant, {**POOL, "summary": f"Recurrence {n}: {long_text}"})
        merged = gateway.admin(
            tenant,
            "POST",
            f"/v1/admin/entries/{other['entry_id']}/merge",
            {"into": entry["entry_id"]},
        )
        assert merged.status == 200, merged.body
    path = f"/v1/admin/entries/{entry['entry_id']}/corrections"
    for n in range(12):
        body = {"title": POOL["title"], "summary": f"Revision {n}: {long_text}"}
        assert gateway.admin(tenant, "POST", path, body).status == 201
    reply = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry['entry_id']}/history")
    assert reply.status == 200
    history = reply.body
    assert curation.sent_bytes(history) <= 400_000 + 2_000  # the answer's own fields
    assert 0 < len(history["recurrences"]) < 5
    assert history["omitted_recurrences"] == 5 - len(history["recurrences"])
    events = history["events"]
    assert events[0]["event_type"] == "entry_created"
    assert events[-1]["event_type"] == "entry_corrected"  # the current revision is listed
    assert len(events) >= 2
    listed = {e["event_id"] for e in events}
    assert history["omitted_events"] > 0
    assert len(listed) + history["omitted_events"] > 12


def test_the_history_bound_holds_at_full_size() -> None:
    """500 events of the longest texts in another script: what is listed fits as sent."""
    summary = "é" * MAX_SUMMARY_CHARS
    rows = [{"payload": {"title": "é" * 200, "summary": summary}} for _ in range(500)]
    kept = curation._within_bytes(rows, curation.MAX_HISTORY_ANSWER_BYTES)
    assert kept[0] is rows[0]
    assert kept[-1] is rows[-1]
    sent = sum(curation.sent_bytes(r["payload"]) for r in kept)
    assert sent <= curation.MAX_HISTORY_ANSWER_BYTES
    assert curation.MAX_HISTORY_ANSWER_BYTES < 6_000_000  # Lambda's answer, with room
    assert len(kept) < 500


def test_growth_counts_utc_weeks_whatever_the_sessions_time_zone(
    database: DatabaseUrls, tenant: str
) -> None:
    conn = connect(database.app)
    try:
        # the server's default zone, or the client's PGTZ: Aurora's is UTC, a laptop's not
        conn.execute("SET TIME ZONE 'Pacific/Auckland'")
        memory = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
        for n, body in enumerate((POOL, LOOK_ALIKE)):
            memory.record_entry(
                tenant,
                {**body, "origin": "admin"},
                WriteContext(actor="admin:edges", idempotency_key=f"admin:edges:growth:{n}"),
            )
        weeks = Curation(memory).growth(tenant).weeks
    finally:
        conn.close()
    assert weeks[-1].created == {"admin": 2}
    assert sum(sum(week.created.values()) for week in weeks) == 2


def test_a_redacted_entrys_history_shows_the_redaction_and_no_removed_text(
    gateway: Gateway, tenant: str, other_tenant: str
) -> None:
    """The catalog lists redacted entries; each one's history says who removed its text,
    when and why (its events' payloads hashed), not a 410 that hides the redaction."""
    secret = "Customer ACME-SECRET-7 leaked their DB password in the ticket"
    entry = _create(gateway, tenant, {**POOL, "summary": POOL["summary"] + " " + secret})
    path = f"/v1/admin/entries/{entry['entry_id']}/redaction"
    assert gateway.admin(tenant, "POST", path, {"reason": "a customer's secret"}).status == 200
    listed = gateway.admin(tenant, "POST", "/v1/admin/catalog", {"status": "redacted"}).body
    assert [e["entry_id"] for e in listed["entries"]] == [entry["entry_id"]]
    reply = gateway.admin(tenant, "GET", f"/v1/admin/entries/{entry['entry_id']}/history")
    assert reply.status == 200, reply.body
    assert reply.body["entry"]["status"] == "redacted"
    kinds = [e["event_type"] for e in reply.body["events"]]
    assert kinds[0] == "entry_created"
    assert kinds[-1] == "entry_redacted"
    assert reply.body["events"][-1]["payload"]["reason"] == "a customer's secret"
    assert "ACME-SECRET-7" not in str(reply.body)
    assert "Checkout pool exhausted" not in str(reply.body)
    other = gateway.admin(other_tenant, "GET", f"/v1/admin/entries/{entry['entry_id']}/history")
    assert other.status == 404


def test_why_not_says_when_the_successor_is_not_served_either(
    gateway: Gateway, tenant: str
) -> None:
    """An entry superseded by one retired since is served by nothing: "which is served
    instead" would send the admin looking for a hit that never comes."""
    old = _create(gateway, tenant, POOL)
    successor = _create(gateway, tenant, LOOK_ALIKE)
    retire = {"reason": "replaced", "superseded_by": successor["entry_id"]}
    path = f"/v1/admin/entries/{old['entry_id']}/retirement"
    assert gateway.admin(tenant, "POST", path, retire).status == 200
    body = {"topic": TOPIC, "entry_id": old["entry_id"]}
    served = gateway.admin(tenant, "POST", "/v1/admin/explanation", body).body
    assert served["verdict"] == "superseded"
    assert "served instead" in served["summary"]

    path = f"/v1/admin/entries/{successor['entry_id']}/retirement"
    assert gateway.admin(tenant, "POST", path, {"reason": "wrong as well"}).status == 200
    orphan = gateway.admin(tenant, "POST", "/v1/admin/explanation", body).body
    assert (orphan["verdict"], orphan["related_entry_id"]) == ("superseded", successor["entry_id"])
    assert "served instead" not in orphan["summary"]
    assert "retired too: neither is served" in orphan["summary"]


def test_opposite_merges_at_once_leave_one_lesson_served(gateway: Gateway, tenant: str) -> None:
    """Two admins merge a pair each the other way round at the same moment: one merge is
    recorded, the other refused, and the lesson stays served (never both merged away)."""
    first = _create(gateway, tenant, POOL)
    second = _create(gateway, tenant, LOOK_ALIKE)
    answers: list[int] = []

    def merge(entry: dict[str, object], into: dict[str, object]) -> None:
        path = f"/v1/admin/entries/{entry['entry_id']}/merge"
        answers.append(gateway.admin(tenant, "POST", path, {"into": into["entry_id"]}).status)

    racing = [
        threading.Thread(target=merge, args=(first, second)),
        threading.Thread(target=merge, args=(second, first)),
    ]
    for thread in racing:
        thread.start()
    for thread in racing:
        thread.join(30)
    assert sorted(answers) == [200, 409]
    statuses = sorted(
        gateway.admin(tenant, "GET", f"/v1/admin/entries/{e['entry_id']}").body["status"]
        for e in (first, second)
    )
    assert statuses == ["active", "merged"]
    assert runtime().service().repository.verify_projection(tenant).mismatches == []
