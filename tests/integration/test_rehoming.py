"""Curation that leaves no wrong answers (issue 24, items 2 and 3): when the canonical
entry of a recurrence group is retired, superseded or corrected to another lesson, its
recurrences move to the successor or resurface (the oldest active again, the others its
recurrences); never left merged into an entry that no longer says their lesson."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.curation.audit import audit
from grandbo.memory.domain.models import EntryStatus, MemoryEntry
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import context, entry
from .test_consolidation import LESSON, OTHER, REWORDED, TOPIC

AGAIN = (
    "Checkout connection leak exhausted the pool again",
    "Again the checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
)


@pytest.fixture
def service(repository: MemoryRepository) -> MemoryService:
    """Merging on: the fake model embeds texts with the same words identically."""
    return MemoryService(repository, FakeEmbeddingProvider(duplicate_distance=0.05))


def group(service: MemoryService, tenant: str) -> tuple[MemoryEntry, list[MemoryEntry]]:
    """A canonical entry and two recurrences merged into it (INC-2, INC-3)."""
    canonical = service.record_entry(tenant, entry(*LESSON), context()).entry
    service.embed_pending(tenant)
    merged = []
    for incident, text in (("INC-2", REWORDED), ("INC-3", LESSON)):
        merged.append(
            service.record_entry(tenant, entry(*text, incident_id=incident), context()).entry
        )
        service.embed_pending(tenant)
    assert service.get_entry(tenant, canonical.entry_id).seen_count == 3
    return canonical, merged


def verified(service: MemoryService, tenant: str) -> None:
    assert service.repository.verify_projection(tenant).mismatches == []
    checks = {f.check for f in audit(service, tenant).findings}
    assert "orphaned_recurrences" not in checks


def test_retiring_the_canonical_entry_resurfaces_its_lesson(
    service: MemoryService, tenant: str
) -> None:
    canonical, (oldest, newer) = group(service, tenant)
    key = context()
    outcome = service.retire_entry(tenant, canonical.entry_id, "worded badly", key)
    assert outcome.recurrences is not None
    assert outcome.recurrences.model_dump() == {
        "how": "resurfaced",
        "entry_id": oldest.entry_id,
        "count": 2,
        "kept": 0,
    }
    resurfaced = service.get_entry(tenant, oldest.entry_id)
    assert resurfaced.status is EntryStatus.ACTIVE
    assert resurfaced.never_merge is False  # not an admin's split: it may take recurrences
    assert (resurfaced.seen_count, resurfaced.seen_in_incidents) == (2, ["INC-3"])
    assert service.get_entry(tenant, newer.entry_id).merged_into == oldest.entry_id
    assert service.get_entry(tenant, canonical.entry_id).seen_count == 1
    hits = service.query_org_memory(tenant, TOPIC).hits
    assert hits
    assert hits[0].entry_id == oldest.entry_id  # the lesson is served again
    verified(service, tenant)
    # the retirement retried: nothing moves twice
    again = service.retire_entry(tenant, canonical.entry_id, "worded badly", key)
    assert again.applied is False
    assert service.get_entry(tenant, oldest.entry_id).seen_count == 2
    verified(service, tenant)


def test_a_named_successor_takes_the_recurrences(service: MemoryService, tenant: str) -> None:
    canonical, merged = group(service, tenant)
    successor = service.record_entry(tenant, entry(*OTHER), context()).entry
    outcome = service.retire_entry(
        tenant, canonical.entry_id, "superseded", context(), superseded_by=successor.entry_id
    )
    assert outcome.recurrences is not None
    assert (outcome.recurrences.how, outcome.recurrences.entry_id) == (
        "moved",
        successor.entry_id,
    )
    taken = service.get_entry(tenant, successor.entry_id)
    assert taken.seen_count == 3
    assert sorted(taken.seen_in_incidents) == ["INC-2", "INC-3"]
    for recurrence in merged:
        assert service.get_entry(tenant, recurrence.entry_id).merged_into == successor.entry_id
    verified(service, tenant)


def test_a_successor_marked_never_merge_takes_none_and_the_lesson_resurfaces(
    service: MemoryService, tenant: str
) -> None:
    canonical, (oldest, _) = group(service, tenant)
    successor = service.record_entry(tenant, entry(*OTHER), context()).entry
    service.set_never_merge(tenant, successor.entry_id, True, context())
    outcome = service.retire_entry(
        tenant, canonical.entry_id, "superseded", context(), superseded_by=successor.entry_id
    )
    assert outcome.recurrences is not None
    assert (outcome.recurrences.how, outcome.recurrences.entry_id) == (
        "resurfaced",
        oldest.entry_id,
    )
    assert service.get_entry(tenant, successor.entry_id).seen_count == 1
    verified(service, tenant)


def test_correcting_the_canonical_entry_to_another_lesson_leaves_its_recurrences_behind(
    service: MemoryService, tenant: str
) -> None:
    canonical, (oldest, newer) = group(service, tenant)
    outcome = service.correct_entry(tenant, canonical.entry_id, entry(*OTHER), context())
    assert outcome.recurrences is not None
    assert (outcome.recurrences.how, outcome.recurrences.entry_id) == (
        "resurfaced",
        oldest.entry_id,
    )
    corrected = service.get_entry(tenant, canonical.entry_id)
    assert (corrected.seen_count, corrected.seen_in_incidents) == (1, [])
    assert service.get_entry(tenant, oldest.entry_id).seen_count == 2
    assert service.get_entry(tenant, newer.entry_id).merged_into == oldest.entry_id
    verified(service, tenant)


def test_a_correction_that_keeps_the_lesson_keeps_its_recurrences(
    service: MemoryService, tenant: str
) -> None:
    canonical, _ = group(service, tenant)
    same_text = entry(*LESSON, service="checkout-api", tags=["checkout", "connection-pool"])
    outcome = service.correct_entry(tenant, canonical.entry_id, same_text, context())
    assert outcome.recurrences is None
    assert service.get_entry(tenant, canonical.entry_id).seen_count == 3
    verified(service, tenant)


def test_the_audit_lists_recurrences_of_an_entry_no_longer_served(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """What an older write (before rehoming) left behind is found."""
    canonical, merged = group(service, tenant)
    with admin_conn.transaction():
        admin_conn.execute(
            "UPDATE org_memory_entries SET status = 'retired'"
            " WHERE tenant_id = %s AND entry_id = %s",
            (tenant, canonical.entry_id),
        )
    findings = {f.check: f for f in audit(service, tenant).findings}
    orphans = findings["orphaned_recurrences"]
    assert orphans.count == 2
    assert orphans.repairable is False
    assert all(str(m.entry_id) in orphans.detail for m in merged)


def test_a_correction_whose_words_still_agree_keeps_every_recurrence(
    service: MemoryService, tenant: str
) -> None:
    """A typo fixed is the same lesson: its recurrences stay (break-it: one comma split
    the group and the canonical entry lost 'seen 3 times')."""
    canonical, _ = group(service, tenant)
    fixed = entry(LESSON[0], LESSON[1].replace("exhausted and", "exhausted, and"))
    outcome = service.correct_entry(tenant, canonical.entry_id, fixed, context())
    assert outcome.recurrences is not None
    assert outcome.recurrences.model_dump() == {
        "how": "kept",
        "entry_id": canonical.entry_id,
        "count": 0,
        "kept": 2,
    }
    assert service.get_entry(tenant, canonical.entry_id).seen_count == 3
    verified(service, tenant)


PAY = (
    "Payments TLS certificate expired overnight",
    "The payments gateway certificate expired overnight and every card authorization "
    "failed its handshake until renewed.",
)
PAY_AGAIN = (
    "Payments gateway certificate expired again",
    "Again the payments gateway certificate expired overnight and every card authorization "
    "failed its handshake until it was renewed.",
)


def test_a_successor_retired_meanwhile_is_never_handed_a_lesson(
    service: MemoryService,
    tenant: str,
    database: Any,
    admin_conn: psycopg.Connection[Any],
) -> None:
    """A superseded by B while B is being retired: B's row is locked before the
    supersession reads it, so it sees B retired and refuses (409), and nothing is left
    merged into an entry no longer served (break-it: A's recurrences went to retired B)."""
    import threading
    import time

    from grandbo.errors import EntryNotActiveError
    from grandbo.storage.connections import connect

    a, _ = group(service, tenant)
    b = service.record_entry(tenant, entry(*PAY), context()).entry
    service.embed_pending(tenant)
    b_again = service.record_entry(tenant, entry(*PAY_AGAIN, incident_id="INC-9"), context()).entry
    service.embed_pending(tenant)
    assert service.get_entry(tenant, b.entry_id).seen_count == 2
    errors: list[BaseException] = []
    retiring = MemoryService(MemoryRepository(connect(database.app)), service.provider)
    superseding = MemoryService(MemoryRepository(connect(database.app)), service.provider)

    def run(call: Any) -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    # a third session holds B's recurrence, so B's retirement stalls inside its rehoming
    admin_conn.execute("BEGIN")
    admin_conn.execute(
        "SELECT 1 FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s FOR UPDATE",
        (tenant, b_again.entry_id),
    )
    first = threading.Thread(
        target=run, args=(lambda: retiring.retire_entry(tenant, b.entry_id, "wrong", context()),)
    )
    first.start()
    time.sleep(0.5)
    second = threading.Thread(
        target=run,
        args=(
            lambda: superseding.retire_entry(
                tenant, a.entry_id, "replaced", context(), superseded_by=b.entry_id
            ),
        ),
    )
    second.start()
    time.sleep(0.5)
    admin_conn.execute("COMMIT")
    first.join(10)
    second.join(10)
    assert [type(e) for e in errors] == [EntryNotActiveError]
    assert service.get_entry(tenant, a.entry_id).status is EntryStatus.ACTIVE
    assert service.query_org_memory(tenant, TOPIC).hits
    verified(service, tenant)
