"""An incident names the recalled entries its investigation confirmed or refuted (issue
43, point 3): each becomes the incident's verdict on that entry, once, in the same
transaction as its findings; an entry the organization does not hold refuses the event
whole; and these trusted outcomes refit the confidence from what was served."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import psycopg
import pytest

from grandbo.errors import InvalidEventError
from grandbo.memory.domain import recalibration
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.incidents import MAX_RECALLED, parse_incident_closed, record_incident
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.service import MemoryService

from .helpers import CHECKOUT_LESSONS, CHECKOUT_TOPIC, context, entry, log_answer
from .test_import_admission import _created, _event, _refused, _stream
from .test_lake_export_import import event_count, exported

TOPIC = CHECKOUT_TOPIC
TEXTS = CHECKOUT_LESSONS


def lake(service: MemoryService, tenant: str) -> list[UUID]:
    ids = [
        service.record_entry(
            tenant, entry(title, summary + " in production today"), context()
        ).entry.entry_id
        for title, summary in TEXTS
    ]
    service.embed_pending()
    return ids


def incident(
    tenant: str, recalled: list[tuple[Any, str]], incident_id: str = "INC-50"
) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "incident_id": incident_id,
        "title": "Checkout errors",
        "service": "checkout-api",
        "closed_at": "2026-11-29T10:00:00Z",
        "findings": [
            {
                "finding_id": "f1",
                "status": "corroborated",
                "title": "Retry path leaked database connections",
                "summary": "The checkout retry path opened a new database connection "
                "without closing the old one until the pool ran dry.",
            }
        ],
        "recalled": [{"entry_id": str(e), "outcome": outcome} for e, outcome in recalled],
    }


def verdict_events(admin_conn: psycopg.Connection[Any], tenant: str) -> list[tuple[Any, ...]]:
    return admin_conn.execute(
        "SELECT entry_id, actor, idempotency_key, payload->>'verdict',"
        " payload->>'incident_id', imported FROM org_memory_events"
        " WHERE tenant_id = %s AND event_type = 'feedback_recorded' ORDER BY event_id",
        (tenant,),
    ).fetchall()


def test_an_incidents_outcomes_become_its_verdicts_once(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # Given entries the investigation was served
    held, misled, _, _, _ = lake(service, tenant)

    # When the incident closes naming one confirmed, one refuted
    closed = parse_incident_closed(incident(tenant, [(held, "confirmed"), (misled, "refuted")]))
    assert [o.applied for o in record_incident(service, closed)] == [True]  # its finding

    # Then each is the incident's verdict on that entry, counted and shown
    assert service.get_entry(tenant, held).feedback.helpful == 1
    assert service.get_entry(tenant, misled).feedback.not_helpful == 1
    by_incident = "incident-closed:INC-50"
    assert verdict_events(admin_conn, tenant) == [
        (held, by_incident, f"incident:INC-50:recalled:{held}", "helpful", "INC-50", False),
        (misled, by_incident, f"incident:INC-50:recalled:{misled}", "not_helpful", "INC-50", False),
    ]
    events = event_count(admin_conn, tenant)

    # And a redelivery records nothing, whatever it now says of them
    again = parse_incident_closed(incident(tenant, [(held, "refuted"), (misled, "refuted")]))
    assert [o.applied for o in record_incident(service, again)] == [False]
    assert event_count(admin_conn, tenant) == events
    assert service.get_entry(tenant, held).feedback.helpful == 1
    assert service.get_entry(tenant, held).feedback.not_helpful == 0


@pytest.mark.parametrize("whose", ["unknown", "another organization's"])
def test_a_recalled_entry_the_organization_does_not_hold_refuses_the_event_whole(
    service: MemoryService,
    tenant: str,
    other_tenant: str,
    admin_conn: psycopg.Connection[Any],
    whose: str,
) -> None:
    held = lake(service, tenant)[0]
    stranger = (
        uuid.uuid4()
        if whose == "unknown"
        else service.record_entry(
            other_tenant,
            entry("Checkout pool exhausted", TEXTS[0][1] + " in production today"),
            context(),
        ).entry.entry_id
    )
    events = event_count(admin_conn, tenant)
    closed = parse_incident_closed(incident(tenant, [(held, "confirmed"), (stranger, "refuted")]))

    with pytest.raises(InvalidEventError) as refused:
        record_incident(service, closed)

    assert str(refused.value).startswith("IncidentClosed.recalled.1.entry_id: ")
    assert str(stranger) in str(refused.value)
    # nothing stored: neither the finding nor the valid outcome
    assert event_count(admin_conn, tenant) == events
    assert service.get_entry(tenant, held).feedback.helpful == 0
    if whose != "unknown":
        assert service.get_entry(other_tenant, stranger).feedback.not_helpful == 0


@pytest.mark.parametrize(
    "recalled",
    [
        [(UUID(int=1), "confirmed"), (UUID(int=1), "refuted")],  # one entry twice
        [(UUID(int=n + 1), "confirmed") for n in range(MAX_RECALLED + 1)],  # too many
        [(UUID(int=1), "helpful")],  # not an outcome
        [("not-a-uuid", "confirmed")],
    ],
)
def test_a_malformed_recalled_list_is_refused_naming_it(
    tenant: str, recalled: list[tuple[Any, str]]
) -> None:
    with pytest.raises(InvalidEventError, match=r"^IncidentClosed\.recalled"):
        parse_incident_closed(incident(tenant, recalled))


def test_an_entry_redacted_since_it_was_recalled_takes_no_verdict(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    held, gone, _, _, _ = lake(service, tenant)
    service.redact_entry(tenant, gone, "pasted a credential", context())
    closed = parse_incident_closed(incident(tenant, [(held, "confirmed"), (gone, "refuted")]))
    record_incident(service, closed)
    assert [row[0] for row in verdict_events(admin_conn, tenant)] == [held]


def test_outcomes_of_five_incidents_are_read_with_what_each_was_served_as_one_source(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # Given five incidents whose agents were served the same five hits
    lake(service, tenant)
    served: dict[UUID, float] = {}
    for n in range(5):
        asked = log_answer(service, tenant, TOPIC, incident_id=f"INC-{n}", caller=f"agent-{n}")
        for hit in asked.hits:
            served[hit.entry_id] = float(hit.confidence or 0.0)
    assert len(served) == 5
    ranked = sorted(served, key=lambda i: served[i])

    # When each closes naming them all: the surest refuted, the others confirmed
    for n in range(5):
        outcomes = [(i, "refuted" if i == ranked[-1] else "confirmed") for i in ranked]
        record_incident(
            service, parse_incident_closed(incident(tenant, outcomes, incident_id=f"INC-{n}"))
        )

    # Then 25 trusted outcomes are read, with the confidences the incidents were served,
    # on the answers of five askers: but the incident channel is one source (issue 50), at
    # its cap, and one source refits nothing (before, five incidents were five sources)
    read = service.repository.served_verdicts(tenant, 500)
    assert len(read) == 25
    assert sorted({v.source for v in read}) == [f"incident-closed:INC-{n}" for n in range(5)]
    assert {recalibration.source_of(v.source) for v in read} == {"incident-closed"}
    assert sorted(v.confidence for v in read) == pytest.approx(sorted([*served.values()] * 5))
    assert sorted({v.asker for v in read}) == [f"agent-{n}" for n in range(5)]
    assert sum(recalibration.weights(read)) == pytest.approx(recalibration.SOURCE_CAP)
    assert service.repository.query_reads(tenant, service.provider.embed_rev)[2] is None


def test_an_incidents_outcomes_move_with_the_lake_as_history(
    service: MemoryService, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    held, misled, _, _, _ = lake(service, tenant)
    record_incident(
        service,
        parse_incident_closed(incident(tenant, [(held, "confirmed"), (misled, "refuted")])),
    )
    lines = exported(service, tenant)

    outcome = LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)

    assert outcome.inserted == len(lines) - 1  # the incident's verdicts admitted as they are
    moved = verdict_events(admin_conn, other_tenant)
    assert [row[:5] for row in moved] == [row[:5] for row in verdict_events(admin_conn, tenant)]
    assert all(row[5] for row in moved)  # marked imported: history, never fit
    assert service.repository.served_verdicts(other_tenant, 500) == []


def test_a_stream_may_not_forge_an_incidents_outcome(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    created = _event(_created())
    lesson = created["entry_id"]

    def verdict(actor: str, key: str, incident_id: str = "INC-9") -> dict[str, Any]:
        payload = {"verdict": "helpful", "incident_id": incident_id, "note": None}
        return _event(
            payload, entry_id=lesson, event_type="feedback_recorded", actor=actor, key=key
        )

    own_key = f"incident:INC-9:recalled:{lesson}"
    # another incident's actor, a key of another entry, the key under another actor
    assert _refused(service, tenant, [created, verdict("incident-closed:INC-8", own_key)]) == (
        "events.1.actor"
    )
    other_entry = f"incident:INC-9:recalled:{uuid.uuid4()}"
    assert _refused(service, tenant, [created, verdict("incident-closed:INC-9", other_entry)]) == (
        "events.1.idempotency_key"
    )
    assert _refused(service, tenant, [created, verdict("query:k", own_key)]) == (
        "events.1.idempotency_key"
    )
    assert event_count(admin_conn, tenant) == 0
    # the incident's outcome as the pipeline writes it is admitted (and is history)
    lines = _stream(tenant, [created, verdict("incident-closed:INC-9", own_key)])
    assert LakeTransfer(service).import_stream(tenant, read_stream(lines)).inserted == 2
