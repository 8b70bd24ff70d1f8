"""An incident's id goes with the text under redaction (issue 34, point 6): it stayed
readable in the redacted entry's events (the actor, the finding's key, verdicts' keys),
shown by export and history, which defeated the learned graph's re-keying. A redelivery
of the incident still writes nothing: the removed payload's digest answers for the key."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest

from grandbo.errors import InvalidInputError
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.domain.models import EntryStatus
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.service import MemoryService

from .helpers import context
from .test_import_admission import _stream
from .test_lake_export_import import event_count, exported

INCIDENT = "INC-PAYROLL-SECRET-7731"
TITLE = "Payroll export leaked the batch signing key"
SUMMARY = (
    "The payroll export job wrote the batch signing key into its debug log, which was "
    "shipped to the shared logging cluster and readable by every team."
)


def _incident(tenant: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "incident_id": INCIDENT,
        "title": "Payroll export incident",
        "service": "payroll-export",
        "closed_at": "2026-11-20T10:00:00Z",
        "findings": [
            {"finding_id": "f1", "status": "corroborated", "title": TITLE, "summary": SUMMARY}
        ],
    }


def _events(admin_conn: psycopg.Connection[Any], tenant: str) -> list[tuple[Any, ...]]:
    return admin_conn.execute(
        "SELECT event_type, actor, idempotency_key, payload::text FROM org_memory_events"
        " WHERE tenant_id = %s ORDER BY event_id",
        (tenant,),
    ).fetchall()


def test_a_redaction_leaves_the_incident_id_nowhere_and_a_redelivery_writes_nothing(
    service: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str, other_tenant: str
) -> None:
    incident = parse_incident_closed(_incident(tenant))
    lesson = record_incident(service, incident)[0].entry
    service.record_caller_feedback(
        tenant, lesson.entry_id, {"verdict": "helpful", "incident_id": INCIDENT}, caller="beacon"
    )
    assert any(INCIDENT in " ".join(map(str, row)) for row in _events(admin_conn, tenant))

    service.redact_entry(tenant, lesson.entry_id, "a signing key was in it", context())

    # nowhere in the log: not in an actor, a key or a payload (before: actor, the finding's
    # key and the verdict's key kept it)
    rows = _events(admin_conn, tenant)
    assert not [row for row in rows if INCIDENT in " ".join(map(str, row))], rows
    assert {row[1] for row in rows if row[0] == "entry_created"} == {"incident-closed:[redacted]"}
    # nor in an export, nor in the history
    lines = exported(service, tenant)
    assert INCIDENT not in "\n".join(lines)
    from grandbo.memory.curation.curator import Curation

    history = Curation(service).history(tenant, lesson.entry_id)
    assert INCIDENT not in history.model_dump_json()

    # a redelivery of the incident (an archive replay, a DLQ redrive) writes nothing: the
    # removed payload's digest is the finding's again
    before = event_count(admin_conn, tenant)
    again = record_incident(service, parse_incident_closed(_incident(tenant)))
    assert [o.applied for o in again] == [False]
    assert again[0].entry.entry_id == lesson.entry_id
    assert again[0].entry.status is EntryStatus.REDACTED
    assert event_count(admin_conn, tenant) == before
    assert service.repository.verify_projection(tenant).mismatches == []

    # the redacted lake moves, and the redelivery into its new home writes nothing either
    LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)
    moved = record_incident(service, parse_incident_closed(_incident(other_tenant)))
    assert [o.applied for o in moved] == [False]
    assert service.repository.verify_projection(other_tenant).mismatches == []


def test_migration_0030_takes_the_incident_id_out_of_entries_redacted_before(
    database: Any, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    from grandbo.embedding.fake import FakeEmbeddingProvider
    from grandbo.memory.repository import MemoryRepository
    from grandbo.migrations import available_migrations, migrate
    from grandbo.storage.connections import connect

    from .helpers import database_at

    with database_at(database, admin_conn, 29) as urls:
        app, owner = connect(urls.app), connect(urls.admin)
        try:
            service = MemoryService(MemoryRepository(app), FakeEmbeddingProvider())
            lesson = record_incident(service, parse_incident_closed(_incident(tenant)))[0].entry
            service.redact_entry(tenant, lesson.entry_id, "a signing key was in it", context())
            assert any(INCIDENT in " ".join(map(str, row)) for row in _events(owner, tenant))

            migrate(urls.admin, up_to=available_migrations()[-1].version)

            rows = _events(owner, tenant)
            assert not [row for row in rows if INCIDENT in " ".join(map(str, row))], rows
            assert service.repository.verify_projection(tenant).mismatches == []
            again = record_incident(service, parse_incident_closed(_incident(tenant)))
            assert [o.applied for o in again] == [False]
        finally:
            app.close()
            owner.close()


def test_a_redacted_text_never_comes_back_by_a_changed_redelivery_or_a_renamed_import(
    service: MemoryService, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    """Break-it: the redelivery was matched on the exact payload, so one closed a second
    later, or with the incident's service renamed, wrote the text again; and the
    pre-redaction export under new entry ids and keys, merged in, served it again."""
    lesson = record_incident(service, parse_incident_closed(_incident(tenant)))[0].entry
    before_redaction = [json.loads(line) for line in exported(service, tenant)[:-1]]
    service.redact_entry(tenant, lesson.entry_id, "a signing key was in it", context())

    def text_events() -> int:
        row = admin_conn.execute(
            "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s"
            " AND payload->>'summary' = %s",
            (tenant, SUMMARY),
        ).fetchone()
        return int(row[0]) if row else 0

    for change in (
        {"closed_at": "2026-11-20T10:00:01Z"},
        {"service": "payroll-web"},
        {"service": None},
    ):
        again = record_incident(service, parse_incident_closed({**_incident(tenant), **change}))
        assert [o.applied for o in again] == [False], change
        assert again[0].entry.status is EntryStatus.REDACTED
    assert text_events() == 0

    renamed_id = str(uuid.uuid4())
    renewed = [
        {**event, "entry_id": renamed_id, "idempotency_key": f"admin:again:{n}", "actor": "admin:x"}
        for n, event in enumerate(before_redaction)
    ]
    for event in renewed:  # an admin's entry now, as an import may claim
        event["payload"] = {**event["payload"], "origin": "admin"}
    with pytest.raises(InvalidInputError) as refused:
        LakeTransfer(service).import_stream(
            tenant, read_stream(_stream(tenant, renewed)), merge=True
        )
    assert "redacted" in refused.value.message
    assert text_events() == 0
    # a new lesson with other words is written as ever
    other = record_incident(
        service,
        parse_incident_closed(
            {
                **_incident(tenant),
                "incident_id": "INC-OTHER-1",
                "findings": [
                    {
                        "finding_id": "f1",
                        "status": "corroborated",
                        "title": "Payroll export retried without backoff",
                        "summary": "The payroll export retried failed uploads at once and "
                        "without backoff, saturating the bank gateway's rate limit.",
                    }
                ],
            }
        ),
    )
    assert [o.applied for o in other] == [True]


def test_an_unfinished_imports_tombstone_does_not_fail_a_write(
    service: MemoryService, tenant: str
) -> None:
    """Break-it: a removed payload stored by the first batch of an import (its entry not
    in the projection until the last batch) made a write of the same text a 404."""
    from .test_import_admission import REMOVED, TOMBSTONE, _event

    loose = str(uuid.uuid4())
    lines = _stream(
        tenant,
        [
            _event(REMOVED, entry_id=loose),
            _event(TOMBSTONE, entry_id=loose, event_type="entry_redacted"),
        ],
    )
    stream = read_stream(lines)
    LakeTransfer(service).import_batch(
        tenant, stream.manifest, 0, stream.links[0], stream.links[1], stream.events[:1]
    )
    written = record_incident(service, parse_incident_closed(_incident(tenant)))
    assert [o.applied for o in written] == [True]
