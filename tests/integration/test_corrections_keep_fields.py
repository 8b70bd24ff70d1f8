"""A correction keeps every field it does not name (issue 34, point 9): `grandbo correct`
without `--service` erased the service (the event log said so), the admin API alike; and
a corrected incident lesson keeps its origin (a filter on origin still finds it)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.cli import main
from grandbo.errors import InvalidInputError, RevisionConflictError
from grandbo.memory.curation.curator import Curation
from grandbo.memory.domain.models import Origin
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations, migrate
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, database_at, entry
from .test_lake_export_import import cli_env  # noqa: F401 - the fixture

TITLE = "Checkout pool exhausted by a connection leak"
SUMMARY = (
    "The checkout service leaked database connections on a retry path until the pool "
    "was exhausted and every request timed out."
)


def _created(service: MemoryService, tenant: str) -> Any:
    return service.record_entry(
        tenant, entry(TITLE, SUMMARY, service="checkout-api", tags=["pgbouncer"]), context()
    ).entry


def _last_event_payload(admin_conn: psycopg.Connection[Any], tenant: str) -> dict[str, Any]:
    row = admin_conn.execute(
        "SELECT payload FROM org_memory_events WHERE tenant_id = %s ORDER BY event_id DESC LIMIT 1",
        (tenant,),
    ).fetchone()
    assert row is not None
    return dict(row[0])


@pytest.mark.usefixtures("cli_env")
def test_grandbo_correct_keeps_the_service_and_the_tags_it_does_not_name(
    service: MemoryService,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lesson = _created(service, tenant)
    summary = SUMMARY + " The retry path now releases its connection."

    assert main(["correct", str(lesson.entry_id), "--tenant", tenant, "--summary", summary]) == 0

    corrected = service.repository.get_entry(tenant, lesson.entry_id)
    assert (corrected.title, corrected.summary) == (TITLE, summary)
    assert corrected.service == "checkout-api"  # before: None, and so in its event
    assert "pgbouncer" in corrected.tags
    payload = _last_event_payload(admin_conn, tenant)
    assert payload["service"] == "checkout-api"
    assert payload["title"] == TITLE
    capsys.readouterr()
    topic = "checkout requests timed out because the database pool was exhausted by a leak"
    assert main(["query", "--tenant", tenant, topic]) == 0
    assert "admin (corrected)" in capsys.readouterr().out  # its origin, and that it was
    # --no-service clears it, saying so; naming nothing at all is refused
    assert main(["correct", str(lesson.entry_id), "--tenant", tenant, "--no-service"]) == 0
    assert service.repository.get_entry(tenant, lesson.entry_id).service is None
    capsys.readouterr()
    assert main(["correct", str(lesson.entry_id), "--tenant", tenant]) == 2
    assert "names at least one" in capsys.readouterr().err
    assert service.repository.verify_projection(tenant).mismatches == []


def test_a_partial_correction_expects_the_revision_it_kept_fields_from(
    service: MemoryService, tenant: str
) -> None:
    lesson = _created(service, tenant)
    service.correct_entry(tenant, lesson.entry_id, {"title": TITLE + " again"}, context())
    # a stale expected revision is still a conflict, a named one wins over the one read
    with pytest.raises(RevisionConflictError):
        service.correct_entry(
            tenant,
            lesson.entry_id,
            {"summary": SUMMARY + " Later."},
            context(),
            expected_revision=1,
        )
    with pytest.raises(InvalidInputError) as refused:
        service.correct_entry(tenant, lesson.entry_id, {}, context())
    assert refused.value.field == "body"
    assert service.repository.get_entry(tenant, lesson.entry_id).revision == 2


def test_a_corrected_incident_lesson_keeps_its_origin(service: MemoryService, tenant: str) -> None:
    incident = parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": "INC-5",
            "title": "Checkout outage",
            "closed_at": "2026-11-20T10:00:00Z",
            "findings": [
                {"finding_id": "f1", "status": "corroborated", "title": TITLE, "summary": SUMMARY}
            ],
        }
    )
    lesson = record_incident(service, incident)[0].entry
    service.correct_entry(tenant, lesson.entry_id, {"summary": SUMMARY + " Fixed."}, context())

    corrected = service.repository.get_entry(tenant, lesson.entry_id)
    assert corrected.origin is Origin.INCIDENT  # before: correction
    assert corrected.revision == 2
    curation = Curation(service)
    assert [e.entry_id for e in curation.catalog(tenant, origin="incident").entries] == [
        lesson.entry_id
    ]
    # "correction" still lists the corrected entries
    assert [e.entry_id for e in curation.catalog(tenant, origin="correction").entries] == [
        lesson.entry_id
    ]
    assert service.repository.verify_projection(tenant).mismatches == []


def test_migration_0029_gives_back_the_origin_an_earlier_correction_replaced(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    latest = available_migrations()[-1].version
    with database_at(database, admin_conn, 28) as urls:
        app, owner = connect(urls.app), connect(urls.admin)
        try:
            service = MemoryService(MemoryRepository(app), _fake())
            lesson = _created(service, tenant)
            service.correct_entry(
                tenant, lesson.entry_id, {"summary": SUMMARY + " Fixed."}, context()
            )
            # as the version before left it
            owner.execute(
                "UPDATE org_memory_entries SET origin = 'correction' WHERE tenant_id = %s",
                (tenant,),
            )
            migrate(urls.admin, up_to=latest)
            restored = service.repository.get_entry(tenant, lesson.entry_id)
            assert restored.origin is Origin.ADMIN
            assert service.repository.verify_projection(tenant).mismatches == []
        finally:
            app.close()
            owner.close()


def _fake() -> Any:
    from grandbo.embedding.fake import FakeEmbeddingProvider

    return FakeEmbeddingProvider()
