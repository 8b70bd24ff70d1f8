"""Event-sourced writes: one transaction, idempotent, append-only, rebuildable."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import (
    EntryNotActiveError,
    EntryNotFoundError,
    InvalidInputError,
    RevisionConflictError,
)
from grandbo.memory.domain.models import EntryStatus, Origin
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import context, entry

POOL = entry(
    "PgBouncer pool exhausted on checkout-api",
    "Doubling workers without raising default_pool_size saturated the pool.",
    service="checkout-api",
    origin="incident",
    incident_id="INC-1",
)
DNS = "CoreDNS was CPU throttled by its 100m limit, so lookups timed out after 5s."
REDIS = "maxmemory was too low, so allkeys-lru evicted session keys and logged users out."
# a summary the minimum-content rule accepts, where another field is the point
SUMMARY = "The pool was sized for half the workers, so requests queued for a connection."


def _events(admin_conn: psycopg.Connection[Any], tenant: str) -> int:
    row = admin_conn.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_create_writes_one_event_and_the_projection(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    outcome = service.record_entry(tenant, POOL, context("k1", actor="incident-closed:INC-1"))
    assert outcome.applied
    stored = service.get_entry(tenant, outcome.entry.entry_id)
    assert stored.origin is Origin.INCIDENT
    assert stored.status is EntryStatus.ACTIVE
    assert stored.revision == 1
    assert "checkout-api" in stored.index_tags
    assert stored.embed_rev is None  # real and citable before it has a vector
    actor = admin_conn.execute(
        "SELECT actor, event_type FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchall()
    assert actor == [("incident-closed:INC-1", "entry_created")]


def test_redelivery_with_the_same_key_changes_nothing(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    first = service.record_entry(tenant, POOL, context("same-key"))
    again = service.record_entry(tenant, POOL, context("same-key"))
    assert not again.applied
    assert again.entry == first.entry
    assert _events(admin_conn, tenant) == 1


def test_a_batch_applies_new_keys_once_in_order_and_reports_known_ones(
    service: MemoryService,
    tenant: str,
    repository: MemoryRepository,
    admin_conn: psycopg.Connection[Any],
) -> None:
    earlier = service.record_entry(tenant, POOL, context("INC-9:f0"))
    dns = entry("DNS timeouts on checkout-api", DNS, service="dns")
    redis = entry("Redis evictions dropped sessions", REDIS)
    outcomes = service.record_entries(
        tenant,
        [
            (POOL, context("INC-9:f0")),  # delivered before
            (dns, context("INC-9:f1")),
            (redis, context("INC-9:f2")),
            (dns, context("INC-9:f1")),  # the same finding twice in one event
        ],
    )
    assert [o.applied for o in outcomes] == [False, True, True, False]
    assert outcomes[0].entry == earlier.entry
    assert outcomes[3].entry == outcomes[1].entry
    assert outcomes[1].entry.service == "dns"
    assert "dns" in outcomes[1].entry.index_tags
    keys = admin_conn.execute(
        "SELECT idempotency_key FROM org_memory_events WHERE tenant_id = %s ORDER BY event_id",
        (tenant,),
    ).fetchall()
    assert [k for (k,) in keys] == ["INC-9:f0", "INC-9:f1", "INC-9:f2"]
    # statistics and postings counted once per applied entry: what a rebuild would produce
    assert repository.verify_projection(tenant).mismatches == []
    stats = admin_conn.execute(
        "SELECT active_entries FROM org_memory_tenant_stats WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert stats == (3,)


def test_concurrent_deliveries_of_one_incident_create_each_entry_once(
    database: Any, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from grandbo.storage.connections import connect

    findings = [
        (
            entry(
                f"Finding {i} about the checkout pool",
                f"Summary {i}: checkout requests waited for a pool connection until timing out.",
            ),
            context(f"k{i}"),
        )
        for i in range(5)
    ]

    def deliver(_: int) -> list[bool]:
        conn = connect(database.app)
        try:
            svc = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
            return [o.applied for o in svc.record_entries(tenant, findings)]
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(deliver, range(4)))
    # each finding applied by exactly one delivery, every delivery answered for all five
    assert [sum(r[i] for r in results) for i in range(5)] == [1] * 5
    assert _events(admin_conn, tenant) == 5
    count = admin_conn.execute(
        "SELECT count(*) FROM org_memory_entries WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert count == (5,)


def test_the_same_key_in_another_tenant_is_another_entry(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    mine = service.record_entry(tenant, POOL, context("shared-key"))
    theirs = service.record_entry(other_tenant, POOL, context("shared-key"))
    assert theirs.applied
    assert theirs.entry.entry_id != mine.entry.entry_id
    assert service.get_entry(tenant, mine.entry.entry_id).tenant_id == tenant


def test_correction_is_a_new_revision_and_drops_the_old_vector(
    service: MemoryService, tenant: str
) -> None:
    created = service.record_entry(tenant, POOL, context())
    service.embed_pending(tenant)
    assert service.get_entry(tenant, created.entry.entry_id).embedded_revision == 1
    corrected = service.correct_entry(
        tenant,
        created.entry.entry_id,
        entry("PgBouncer pool exhausted", "The pool was sized for half the workers."),
        context(),
        expected_revision=1,
    )
    assert corrected.entry.revision == 2
    # the origin stays (issue 34, point 9): its revision says it was corrected
    assert corrected.entry.origin is Origin.INCIDENT
    assert corrected.entry.embed_rev is None
    assert corrected.entry.embedded_revision is None


def test_correction_against_a_stale_revision_conflicts(service: MemoryService, tenant: str) -> None:
    created = service.record_entry(tenant, POOL, context())
    text = entry("A corrected title", "A corrected summary of the finding: " + SUMMARY)
    service.correct_entry(tenant, created.entry.entry_id, text, context())
    with pytest.raises(RevisionConflictError):
        service.correct_entry(tenant, created.entry.entry_id, text, context(), expected_revision=1)


def test_retired_entries_cannot_be_corrected_or_retired_again(
    service: MemoryService, tenant: str
) -> None:
    created = service.record_entry(tenant, POOL, context())
    retired = service.retire_entry(tenant, created.entry.entry_id, "wrong diagnosis", context())
    assert retired.entry.status is EntryStatus.RETIRED
    with pytest.raises(EntryNotActiveError):
        service.retire_entry(tenant, created.entry.entry_id, "again", context())
    with pytest.raises(EntryNotActiveError):
        service.correct_entry(tenant, created.entry.entry_id, entry("Title x", SUMMARY), context())


def test_supersede_points_at_the_replacement(service: MemoryService, tenant: str) -> None:
    old = service.record_entry(tenant, POOL, context())
    new = service.record_entry(
        tenant, entry("Better finding", "A more precise account. " + SUMMARY), context()
    )
    outcome = service.retire_entry(
        tenant, old.entry.entry_id, "replaced", context(), superseded_by=new.entry.entry_id
    )
    assert outcome.entry.status is EntryStatus.SUPERSEDED
    assert outcome.entry.superseded_by == new.entry.entry_id


def test_unknown_entries_are_not_found(service: MemoryService, tenant: str) -> None:
    import uuid

    with pytest.raises(EntryNotFoundError):
        service.retire_entry(tenant, uuid.uuid4(), "reason", context())


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"title": "", "summary": SUMMARY}, "title"),
        ({"title": "ok title", "summary": "x" * 20_001}, "summary"),
        ({"title": "nul \x00 title", "summary": SUMMARY}, "title"),
        ({"title": "ok title", "summary": "lone \udc00 surrogate here"}, "summary"),
        (
            {"title": "ok title", "summary": SUMMARY, "service": "bad service!"},
            "service",
        ),
        ({"title": "ok title", "summary": SUMMARY, "origin": "correction"}, "origin"),
        ({"title": "ok title", "summary": SUMMARY, "colour": "red"}, "colour"),
        ({"title": 42, "summary": SUMMARY}, "title"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(
    service: MemoryService,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    bad: dict[str, Any],
    field: str,
) -> None:
    with pytest.raises(InvalidInputError) as error:
        service.record_entry(tenant, bad, context())
    assert error.value.field == field
    assert _events(admin_conn, tenant) == 0


def test_a_failure_inside_the_transaction_leaves_neither_event_nor_entry(
    repository: MemoryRepository, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    from grandbo.memory.domain.models import NewEntry

    new = NewEntry(title="Half written", summary="This write must roll back entirely: " + SUMMARY)
    with pytest.raises(psycopg.errors.CheckViolation):
        # an empty tag fails the insert after the event row went in: all or nothing
        repository.create_entry(tenant, new, ["ok", ""], context())
    assert _events(admin_conn, tenant) == 0
    assert admin_conn.execute(
        "SELECT count(*) FROM org_memory_entries WHERE tenant_id = %s", (tenant,)
    ).fetchone() == (0,)


def test_events_refuse_update_delete_and_truncate_even_for_the_owner(
    service: MemoryService,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    app_conn: psycopg.Connection[Any],
) -> None:
    service.record_entry(tenant, POOL, context())
    for statement in (
        "UPDATE org_memory_events SET actor = 'x' WHERE tenant_id = %s",
        "DELETE FROM org_memory_events WHERE tenant_id = %s",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            admin_conn.execute(statement, (tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute(statement, (tenant,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
        admin_conn.execute("TRUNCATE org_memory_events")
    assert _events(admin_conn, tenant) == 1


def test_rebuild_from_events_equals_the_live_projection(
    service: MemoryService, tenant: str, repository: MemoryRepository
) -> None:
    a = service.record_entry(tenant, POOL, context())
    b = service.record_entry(tenant, entry("DNS timeouts", DNS), context())
    c = service.record_entry(tenant, entry("Redis evictions", REDIS), context())
    service.embed_pending(tenant)
    service.correct_entry(tenant, a.entry.entry_id, entry("Pool sizing", SUMMARY), context())
    service.retire_entry(tenant, b.entry.entry_id, "duplicate", context())
    before = {e: repository.get_entry(tenant, e) for e in (a.entry.entry_id, c.entry.entry_id)}

    assert repository.verify_projection(tenant).mismatches == []
    repository.rebuild_projection(tenant)
    report = repository.verify_projection(tenant)

    assert report.mismatches == []
    assert report.events == 5
    assert report.entries == 3
    after = {e: repository.get_entry(tenant, e) for e in before}
    assert after == before  # vectors kept where the revision is unchanged (c), none for a


def test_verification_detects_a_projection_mutated_behind_the_events(
    service: MemoryService,
    tenant: str,
    repository: MemoryRepository,
    admin_conn: psycopg.Connection[Any],
) -> None:
    created = service.record_entry(tenant, POOL, context())
    admin_conn.execute(
        "UPDATE org_memory_entries SET title = 'tampered' WHERE tenant_id = %s AND entry_id = %s",
        (tenant, created.entry.entry_id),
    )
    report = repository.verify_projection(tenant)
    assert len(report.mismatches) == 1
    assert "tampered" in report.mismatches[0]


def test_an_embedding_that_fails_leaves_the_entry_intact(
    repository: MemoryRepository, tenant: str
) -> None:
    class Down(FakeEmbeddingProvider):
        def _embed(self, texts: list[str]) -> list[list[float]]:
            raise TimeoutError("bedrock read timeout")

    service = MemoryService(repository, Down())
    created = service.record_entry(tenant, POOL, context())
    from grandbo.errors import EmbeddingError

    with pytest.raises(EmbeddingError):
        service.embed_pending(tenant)
    stored = repository.get_entry(tenant, created.entry.entry_id)
    assert stored.title == POOL["title"]
    assert stored.embed_rev is None
    assert [job.entry_id for job in service.pending_jobs(tenant)] == [created.entry.entry_id]


def test_a_stored_vector_always_belongs_to_the_current_revision(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """The vector leg relies on this constraint instead of comparing two columns."""
    created = service.record_entry(tenant, POOL, context())
    service.embed_pending(tenant)
    with pytest.raises(psycopg.errors.CheckViolation, match="vector_is_current"):
        admin_conn.execute(
            "UPDATE org_memory_entries SET revision = revision + 1"
            " WHERE tenant_id = %s AND entry_id = %s",
            (tenant, created.entry.entry_id),
        )


def test_entry_rows_stay_whole_next_to_their_vector(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """No column moves to TOAST just because the 4 KB vector is inline (migration 0005)."""
    created = service.record_entry(tenant, POOL, context())
    service.embed_pending(tenant)
    row = admin_conn.execute(
        "SELECT pg_column_toast_chunk_id(embed_rev), pg_column_toast_chunk_id(summary),"
        " pg_column_toast_chunk_id(tags), embedding IS NOT NULL"
        " FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
        (tenant, created.entry.entry_id),
    ).fetchone()
    assert row == (None, None, None, True)
    # set on every partition (migration 0016: the partitioned parent stores nothing)
    options = admin_conn.execute(
        "SELECT c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'org_memory_entries'::regclass"
    ).fetchall()
    assert len(options) == 16
    assert all("toast_tuple_target=8160" in (row[0] or []) for row in options)


def test_a_rebuild_reports_its_progress_fold_then_writes(
    service: MemoryService, repository: MemoryRepository, tenant: str
) -> None:
    """Issue 45: long work shows progress. A rebuild hands its events to the fold, then its
    entries to the writes, through the wrapper (`grandbo rebuild` draws each as a bar),
    and what it writes is what it folded."""
    for n in range(4):
        created = service.record_entry(
            tenant,
            entry(
                f"Disk full on host {n}",
                f"Host {n} filled its data disk with rotated logs until search stopped.",
            ),
            context(),
        )
    service.retire_entry(tenant, created.entry.entry_id, "fixed for good", context())
    seen: list[tuple[str, int, int]] = []

    def progress(items: Any, total: int) -> Any:
        listed = list(items)
        seen.append((type(listed[0]).__name__, len(listed), total))
        return listed

    report = repository.rebuild_projection(tenant, progress=progress)
    assert seen == [("StoredEvent", 5, 5), ("ProjectedEntry", 4, 4)]
    assert (report.events, report.entries) == (5, 4)
    assert repository.verify_projection(tenant).mismatches == []
