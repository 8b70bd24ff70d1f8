"""An import is a write (issue 34, points 1-3): every imported event is held to the rules
of the write it stands for before anything of its batch is stored; a tombstone is final
whatever arrives; an organization already holding an event no replay can fold (an
earlier version's import) is reported, never bricked."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.cli import main
from grandbo.errors import EntryRedactedError, InvalidInputError
from grandbo.memory.curation.audit import audit
from grandbo.memory.curation.curator import Curation
from grandbo.memory.domain.lake_stream import LakeEvent, StreamDigest, read_stream
from grandbo.memory.domain.models import EntryStatus
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.text.tags import tags_for

from .helpers import context, entry
from .test_lake_export_import import event_count, exported, merging_service

TITLE = "Checkout pool exhausted by a connection leak"
SUMMARY = (
    "The checkout service leaked database connections on a retry path until the pool "
    "was exhausted and every request timed out."
)


def _created(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "title": TITLE,
        "summary": SUMMARY,
        "tags": tags_for([TITLE, SUMMARY, "checkout-api"]),
        "service": "checkout-api",
        "origin": "admin",
        "incident_id": None,
        "kind": "durable",
    }
    return {**payload, **changes}


def _event(
    payload: dict[str, Any],
    *,
    entry_id: str | None = None,
    event_type: str = "entry_created",
    actor: str = "admin:ops",
    key: str | None = None,
    at: str = "2026-11-01T00:00:00+00:00",
) -> dict[str, Any]:
    return {
        "entry_id": entry_id or str(uuid.uuid4()),
        "event_type": event_type,
        "revision": 1,
        "payload": payload,
        "actor": actor,
        "idempotency_key": key or f"admin:ops:{uuid.uuid4()}",
        "recorded_at": at,
    }


def _stream(tenant: str, events: list[dict[str, Any]]) -> list[str]:
    """A stream whose manifest and chain match its events: what a hostile exporter sends."""
    digest = StreamDigest(tenant)
    lines = [digest.add(LakeEvent.model_validate(event)) for event in events]
    return [*lines, digest.manifest().line()]


def _refused(service: MemoryService, tenant: str, events: list[dict[str, Any]]) -> str:
    with pytest.raises(InvalidInputError) as refused:
        LakeTransfer(service).import_stream(tenant, read_stream(_stream(tenant, events)))
    return refused.value.field


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (_created(title={"a": 1}), "events.0.payload.title"),
        (_created(tags=[]), "events.0.payload.tags"),
        (_created(tags=["not a tag"]), "events.0.payload.tags.0"),
        (_created(kind="episodic", ttl_days=10**12), "events.0.payload.ttl_days"),
        (_created(title="x"), "events.0.payload.title"),
        (_created(summary="Something broke."), "events.0.payload.summary"),
        (_created(origin="correction"), "events.0.payload.origin"),
        (_created(service="checkout api; drop"), "events.0.payload.service"),
        (_created(title=f"{TITLE} "), "events.0.payload.title"),
        (_created(extra="field"), "events.0.payload.extra"),
        (_created(incident_at="2026-11-01T00:00:00+00:00"), "events.0.payload.incident_at"),
    ],
)
def test_an_imported_payload_the_write_path_would_refuse_is_refused_naming_its_field(
    service: MemoryService,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    payload: Any,
    field: str,
) -> None:
    # Before: a title {"a": 1} was committed and then answered 500; tags [] committed a
    # permanent index drift; ttl_days 10**12 was an OverflowError (500)
    assert _refused(service, tenant, [_event(payload)]) == field
    assert event_count(admin_conn, tenant) == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"at": "0001-01-01T00:00:00+00:00"}, "events.0.recorded_at"),
        ({"at": "9999-01-01T00:00:00+00:00"}, "events.0.recorded_at"),
        ({"actor": "admin\u0000x"}, "events.0.actor"),
        # an incident's actor on an admin's entry, and an incident's key on it
        ({"actor": "incident-closed:INC-9"}, "events.0.actor"),
        ({"key": "incident:INC-9:finding:f1"}, "events.0.idempotency_key"),
    ],
)
def test_an_import_may_not_claim_a_moment_or_a_writer_no_write_could_have(
    service: MemoryService,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    change: dict[str, str],
    field: str,
) -> None:
    assert _refused(service, tenant, [_event(_created(), **change)]) == field
    assert event_count(admin_conn, tenant) == 0


def test_a_forged_incident_finding_cannot_swallow_the_real_delivery(
    service: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """Break-it: a back-dated entry_created with the incident pipeline's actor and key and
    a one-letter title was imported; the real delivery then created nothing."""
    key = "incident:INC-9:finding:f1"
    forged = _created(title="x", origin="incident", incident_id="INC-9")
    assert _refused(service, tenant, [_event(forged, actor="incident-closed:INC-9", key=key)]) == (
        "events.0.payload.title"
    )
    # the pipeline's actor with another incident's key, or its key under another finding
    # shape, is refused too, whatever the text
    real_text = _created(origin="incident", incident_id="INC-9")
    assert (
        _refused(service, tenant, [_event(real_text, actor="incident-closed:INC-8", key=key)])
        == "events.0.actor"
    )
    assert (
        _refused(service, tenant, [_event(real_text, actor="incident-closed:INC-9", key="admin:k")])
        == "events.0.idempotency_key"
    )
    assert event_count(admin_conn, tenant) == 0

    # the real delivery of the incident is written as ever
    incident = parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": "INC-9",
            "title": "Checkout outage",
            "closed_at": "2026-11-20T10:00:00Z",
            "findings": [
                {"finding_id": "f1", "status": "corroborated", "title": TITLE, "summary": SUMMARY}
            ],
        }
    )
    assert [o.applied for o in record_incident(service, incident)] == [True]


def test_an_incident_finding_moves_with_its_lake_and_still_dedupes_its_redelivery(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    """What an import may claim, the legitimate half: the incident pipeline's events, as
    it wrote them, move with the lake and keep deduplicating the incident's redelivery."""
    incident = {
        "tenant_id": tenant,
        "incident_id": "INC-77",
        "title": "Checkout outage",
        "service": "checkout-api",
        "closed_at": "2026-11-20T10:00:00Z",
        "findings": [
            {"finding_id": "f1", "status": "corroborated", "title": TITLE, "summary": SUMMARY}
        ],
    }
    record_incident(service, parse_incident_closed(incident))
    lines = exported(service, tenant)
    outcome = LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)
    assert outcome.inserted == 1
    redelivered = record_incident(
        service, parse_incident_closed({**incident, "tenant_id": other_tenant})
    )
    assert [o.applied for o in redelivered] == [False]


def test_a_redacted_entry_never_comes_back_through_an_import_under_new_keys(
    app_conn: psycopg.Connection[Any], admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """Break-it: the pre-redaction export, its keys renewed and its manifest recomputed,
    merged in: the entry was active again with its text, served, and answered 200."""
    service = merging_service(app_conn)
    secret = service.record_entry(tenant, entry(TITLE, SUMMARY, service="checkout-api"), context())
    service.correct_entry(
        tenant,
        secret.entry.entry_id,
        entry(TITLE, SUMMARY + " Again.", service="checkout-api"),
        context(),
    )
    before = [json.loads(line) for line in exported(service, tenant)[:-1]]
    service.redact_entry(tenant, secret.entry.entry_id, "a credential was pasted", context())
    events_before = event_count(admin_conn, tenant)
    renewed = [{**event, "idempotency_key": f"admin:replay:{n}"} for n, event in enumerate(before)]

    with pytest.raises(InvalidInputError) as refused:
        LakeTransfer(service).import_stream(
            tenant, read_stream(_stream(tenant, renewed)), merge=True
        )

    assert refused.value.field.startswith("events.")
    assert "tombstone is final" in refused.value.message
    assert event_count(admin_conn, tenant) == events_before
    assert (
        service.repository.get_entry(tenant, secret.entry.entry_id).status is EntryStatus.REDACTED
    )
    with pytest.raises(EntryRedactedError):
        service.get_entry(tenant, secret.entry.entry_id)
    # a correction of the tombstone, or a second redaction, are refused the same way
    for event_type, payload in [
        (
            "entry_corrected",
            {k: v for k, v in _created().items() if k in {"title", "summary", "tags", "service"}},
        ),
        ("entry_redacted", {"reason": "again", "origin": "admin", "kind": "durable"}),
    ]:
        forged = _event(payload, entry_id=str(secret.entry.entry_id), event_type=event_type)
        with pytest.raises(InvalidInputError) as again:
            LakeTransfer(service).import_stream(
                tenant, read_stream(_stream(tenant, [forged])), merge=True
            )
        assert "tombstone is final" in again.value.message
    assert event_count(admin_conn, tenant) == events_before


def test_the_replay_keeps_a_tombstone_whatever_event_of_it_comes_later(tenant: str) -> None:
    """The fold itself: events after an entry's redaction, in any order, change nothing
    (what a rebuild or an audit of a log written before this check would otherwise show)."""
    from grandbo.memory.domain.models import EventType
    from grandbo.memory.domain.projection import StoredEvent, replay

    entry_id = uuid.uuid4()
    at = datetime(2026, 11, 1, tzinfo=UTC)

    def event(kind: EventType, payload: dict[str, Any], minutes: int) -> StoredEvent:
        return StoredEvent(entry_id, kind, 1, payload, at + timedelta(minutes=minutes))

    tombstone = {"reason": "pasted", "origin": "admin", "kind": "durable"}
    text = {k: v for k, v in _created().items() if k in {"title", "summary", "tags", "service"}}
    events = [
        event(EventType.CREATED, {"redacted": True, "sha256": "0" * 64}, 0),
        event(EventType.REDACTED, tombstone, 1),
        event(EventType.CREATED, _created(), 2),
        event(EventType.CORRECTED, text, 3),
        event(EventType.SPLIT, {}, 4),
    ]
    state = replay(events)
    assert state[entry_id].status is EntryStatus.REDACTED
    assert state[entry_id].title == "[redacted]"


def test_an_event_stored_by_an_earlier_version_is_reported_and_nothing_is_bricked(
    own_database: tuple[MemoryService, psycopg.Connection[Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Break-it: one such event made health a 500, crashed `grandbo rebuild` (and its
    --verify-only) and stopped `grandbo audit` of every organization at it."""
    service, owner = own_database
    bricked, healthy = "a-bricked", "b-healthy"
    for tenant in (bricked, healthy):
        service.record_entry(tenant, entry(TITLE, SUMMARY, service="checkout-api"), context())
    # what an earlier version's import committed before it answered 500
    bad = uuid.uuid4()
    owner.execute(
        "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
        " actor, idempotency_key) VALUES (%s, %s, 'entry_created', 1, %s, 'admin:x', 'k-bad')",
        (bricked, bad, json.dumps(_created(title={"a": 1}))),
    )

    health = audit(service, bricked)
    assert [f.check for f in health.findings] == ["unreplayable_events"]
    assert str(bad) in health.findings[0].detail
    assert not health.healthy
    assert audit(service, healthy).healthy

    assert main(["rebuild", "--tenant", bricked]) == 0
    out = capsys.readouterr().out
    assert "rebuilt 1 entries" in out
    assert "LEFT OUT" in out
    assert main(["rebuild", "--tenant", bricked, "--verify-only"]) == 1
    assert "LEFT OUT" in capsys.readouterr().out
    assert main(["audit", "--json"]) == 1
    report = {h["tenant_id"]: h for h in json.loads(capsys.readouterr().out)}
    assert set(report) == {bricked, healthy}  # the audit went past the bricked one
    assert report[healthy]["healthy"] is True
    assert [f["check"] for f in report[bricked]["findings"]] == ["unreplayable_events"]
    # and the organization still takes writes and answers queries
    service.record_entry(
        bricked, entry(TITLE, SUMMARY + " Twice.", service="checkout-api"), context()
    )
    assert service.query_org_memory(bricked, "checkout requests time out on the database pool")
    # an import into it refuses only what is its own batch's
    lines = exported(service, healthy)
    outcome = LakeTransfer(service).import_stream(
        bricked, read_stream(lines), rename=True, merge=True
    )
    assert outcome.complete


def test_an_import_beside_live_deliveries_and_a_redaction_leaves_the_lake_whole(
    database: DatabaseUrls, tenant: str, other_tenant: str
) -> None:
    """The acceptance's crowd: a merge import of another organization's lake, incidents
    delivered meanwhile (each twice), and a redaction of one of them, at once."""
    import threading

    def fresh() -> tuple[MemoryService, psycopg.Connection[Any]]:
        conn = connect(database.app)
        return merging_service(conn), conn

    source, source_conn = fresh()
    for n in range(6):
        source.record_entry(
            other_tenant,
            entry(
                f"Queue consumer {n} stalled on a poison message",
                f"Consumer group {n} of the orders queue stalled on a poison message that "
                "failed deserialization and was redelivered without end.",
            ),
            context(),
        )
    lines = exported(source, other_tenant)
    target, target_conn = fresh()
    first = target.record_entry(tenant, entry(TITLE, SUMMARY, service="checkout-api"), context())

    def incident(n: int) -> dict[str, Any]:
        return {
            "tenant_id": tenant,
            "incident_id": f"INC-{n}",
            "title": "Checkout outage",
            "closed_at": "2026-11-20T10:00:00Z",
            "findings": [
                {
                    "finding_id": "f1",
                    "status": "corroborated",
                    "title": f"Checkout pool {n} exhausted by a slow query",
                    "summary": f"A slow report query {n} held checkout connections until the "
                    "pool was exhausted and every request timed out waiting.",
                }
            ],
        }

    errors: list[BaseException] = []

    def run(work: Any) -> None:
        try:
            service, conn = fresh()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
            return
        try:
            work(service)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            conn.close()

    workers = [
        threading.Thread(
            target=run,
            args=(
                lambda s: LakeTransfer(s).import_stream(
                    tenant, read_stream(lines), rename=True, merge=True, batch_size=2
                ),
            ),
        ),
        *(
            threading.Thread(
                target=run,
                args=(lambda s, n=n: record_incident(s, parse_incident_closed(incident(n))),),
            )
            for n in [1, 2, 3, 1, 2, 3]
        ),
        threading.Thread(
            target=run,
            args=(lambda s: s.redact_entry(tenant, first.entry.entry_id, "pasted", context()),),
        ),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert errors == []

    report = target.repository.verify_projection(tenant)
    assert report.mismatches == []
    assert report.unreplayable == []
    entries = Curation(target).catalog(tenant, limit=200).entries
    titles = [e.title for e in entries if e.status is not EntryStatus.REDACTED]
    for n in (1, 2, 3):  # each incident's finding written once
        assert titles.count(f"Checkout pool {n} exhausted by a slow query") == 1
    assert sum(t.startswith("Queue consumer") for t in titles) == 6
    assert target.repository.get_entry(tenant, first.entry.entry_id).status is EntryStatus.REDACTED
    source_conn.close()
    target_conn.close()


REMOVED = {"redacted": True, "sha256": "0" * 64}
TOMBSTONE = {"reason": "pasted", "origin": "admin", "kind": "durable"}


def _tombstoned(entry_id: str, **tombstone: Any) -> list[dict[str, Any]]:
    return [
        _event(REMOVED, entry_id=entry_id),
        _event({**TOMBSTONE, **tombstone}, entry_id=entry_id, event_type="entry_redacted"),
    ]


@pytest.mark.parametrize(
    ("events", "field"),
    [
        # break-it (issue 34): each committed, then a 500, and some bricked every rebuild
        ([_event(_created(kind="episodic"))], "events.0.payload.ttl_days"),
        (_tombstoned("e1", expires_at="2026-05-01T00:00:00+00:00"), "events.1.payload.expires_at"),
        (_tombstoned("e1", kind="episodic"), "events.1.payload.expires_at"),
        (
            _tombstoned("e1", kind="episodic", expires_at="2026-05-01T00:00:00"),
            "events.1.payload.expires_at",
        ),
        (
            _tombstoned("e1", kind="episodic", expires_at="9999-12-31T23:59:59-01:00"),
            "events.1.payload.expires_at",
        ),
        (_tombstoned("e1", service="a b; drop"), "events.1.payload.service"),
        (
            [
                _event(_created(), entry_id="e1"),
                _event(
                    {"merged_into": "e1", "by": "x\u0000y"},
                    entry_id="e1",
                    event_type="entry_merged",
                ),
            ],
            "events.1.payload.by",
        ),
        (
            [
                _event(_created(), entry_id="e1"),
                _event({"merged_into": "e1"}, entry_id="e1", event_type="entry_merged"),
            ],
            "events.1.payload.merged_into",
        ),
    ],
)
def test_a_crafted_stream_that_committed_and_then_failed_is_refused_before_it_is_stored(
    service: MemoryService,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    events: list[dict[str, Any]],
    field: str,
) -> None:
    ids = {"e1": str(uuid.uuid4())}
    concrete = json.loads(json.dumps(events).replace('"e1"', json.dumps(ids["e1"])))
    assert _refused(service, tenant, concrete) == field
    assert event_count(admin_conn, tenant) == 0
    assert service.repository.rebuild_projection(tenant).unreplayable == []


def test_a_planted_redacted_key_can_neither_be_imported_nor_block_a_redaction(
    service: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """Break-it: a removed payload imported under the key a later redaction would give
    the real entry's event made that redaction fail (UniqueViolation, a 500)."""
    lesson = service.record_entry(tenant, entry(TITLE, SUMMARY, service="checkout-api"), context())
    planted = str(uuid.uuid4())
    key = f"redacted:{lesson.entry.entry_id}:1:{'0' * 32}"
    events = [
        _event(REMOVED, entry_id=planted, key=key),
        _event(TOMBSTONE, entry_id=planted, event_type="entry_redacted"),
    ]
    with pytest.raises(InvalidInputError) as refused:
        LakeTransfer(service).import_stream(
            tenant, read_stream(_stream(tenant, events)), merge=True
        )
    assert refused.value.field == "events.0.idempotency_key"
    outcome = service.redact_entry(tenant, lesson.entry.entry_id, "pasted", context())
    assert outcome.applied
    assert service.repository.verify_projection(tenant).mismatches == []
