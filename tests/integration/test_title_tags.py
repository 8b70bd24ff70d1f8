"""Field weighting on the lexical leg (issue 13, item 2): a tag the title carries counts
TITLE_TAG_TF times; postings written before migration 0014 rank as body tags until the
backfill fills their flag, and the rebuild writes the flags the write path writes."""

from __future__ import annotations

from typing import Any

import psycopg

from grandbo.memory.service import MemoryService

from .helpers import context, entry

TOPIC = "replication lag on the orders database grew after the nightly vacuum started"


def _add(memory: MemoryService, tenant: str, title: str, summary: str) -> Any:
    return memory.record_entry(tenant, entry(title, summary), context()).entry


def _three(service: MemoryService, tenant: str) -> tuple[Any, Any]:
    """Two entries with the same tags, `replication` in one's title and the other's body."""
    summary = (
        "the orders database fell behind while the nightly vacuum held locks,"
        " so replication stalled for an hour"
    )
    titled = _add(service, tenant, "Replication stalled", summary)
    body = _add(service, tenant, "Stalled for an hour", summary)
    _add(  # an unrelated entry, so `replication` is rarer than half the lake
        service,
        tenant,
        "Banner colour wrong",
        "the marketing banner on the homepage used the old brand palette after a redesign",
    )
    return titled, body


def _scores(service: MemoryService, tenant: str) -> dict[Any, float]:
    return {c.entry_id: c.score for c in service.rank(tenant, TOPIC, use_vector=False).legs.lexical}


def _unmark(admin_conn: psycopg.Connection[Any], tenant: str) -> None:
    """What a lake written before migration 0014 looks like: no flag known."""
    admin_conn.execute(
        "UPDATE org_memory_tag_postings SET in_title = NULL WHERE tenant_id = %s", (tenant,)
    )
    admin_conn.commit()


def test_a_topic_tag_in_the_title_outranks_the_same_tag_in_the_body(
    service: MemoryService, tenant: str
) -> None:
    titled, body = _three(service, tenant)
    assert set(titled.tags) == set(body.tags)  # the same tag set: only the field differs

    scores = _scores(service, tenant)

    assert scores[titled.entry_id] > scores[body.entry_id]


def test_unmarked_postings_rank_as_body_tags_until_the_backfill_marks_them(
    service: MemoryService, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    titled, body = _three(service, tenant)
    _three(service, other_tenant)
    marked = _scores(service, tenant)
    _unmark(admin_conn, tenant)
    _unmark(admin_conn, other_tenant)

    unmarked = _scores(service, tenant)
    # every tag ranks as a body tag: the two entries tie, as before field weighting
    assert unmarked[titled.entry_id] == unmarked[body.entry_id]
    assert service.repository.verify_projection(tenant).mismatches

    assert service.mark_title_tags(tenant, limit=1) == 1  # a bounded share per call
    assert service.mark_title_tags(tenant) == 2
    assert service.mark_title_tags(tenant) == 0  # nothing left

    assert _scores(service, tenant) == marked
    assert service.repository.verify_projection(tenant).mismatches == []
    assert service.repository.verify_projection(other_tenant).mismatches  # one tenant only
    assert service.mark_title_tags() == 3  # every tenant
    assert service.repository.verify_projection(other_tenant).mismatches == []


def test_the_rebuild_writes_the_flags_the_write_path_writes(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    _three(service, tenant)
    written = _scores(service, tenant)
    _unmark(admin_conn, tenant)

    report = service.repository.rebuild_projection(tenant)

    assert report.mismatches == []
    assert service.repository.verify_projection(tenant).mismatches == []
    assert _scores(service, tenant) == written
