"""Tags are words (issue 53, point 1): what an entry was given is kept and shown as it was
written, by every door (the API's entry and hits, an incident's lesson, a correction that
does not name them, a rebuild, a lake moved to another organization); the lexical index
keeps its stems to itself. Entries stored before migration 0041 held only stems: the
backfill spells them back in a word the lake wrote them from."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.service import MemoryService
from grandbo.text.tags import tags_for, tokenize

from .helpers import context, entry

TITLE = "Service discovery lost the cache nodes"
SUMMARY = (
    "After the registry restarted, clients resolved no cache nodes for ten minutes and "
    "every request fell through to the database."
)
TAGS = ["Redis", "service-discovery", "OOMKilled", "caching"]


def test_an_entry_keeps_the_tags_it_was_given_as_written(
    service: MemoryService, tenant: str
) -> None:
    written = service.record_entry(
        tenant,
        entry(TITLE, SUMMARY, service="checkout-api", tags=[*TAGS, " redis ", "Caching"]),
        context(),
    ).entry
    assert written.tags == TAGS  # trimmed, a repeat in another case left out
    stored = service.get_entry(tenant, written.entry_id)
    assert stored.tags == TAGS
    assert "redi" in stored.index_tags  # the index's stem
    assert "redi" not in stored.tags
    assert "index_tags" not in stored.model_dump(mode="json")
    (hit,) = service.query_org_memory(
        tenant, "clients resolved no redis nodes after the registry restart"
    ).hits
    assert hit.tags == TAGS
    # a correction that does not name them keeps them, as written
    service.correct_entry(tenant, written.entry_id, {"summary": SUMMARY + " Fixed."}, context())
    assert service.get_entry(tenant, written.entry_id).tags == TAGS
    # named, they are replaced
    service.correct_entry(tenant, written.entry_id, {"tags": ["Memcached"]}, context())
    assert service.get_entry(tenant, written.entry_id).tags == ["Memcached"]
    assert service.repository.verify_projection(tenant).mismatches == []
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, written.entry_id).tags == ["Memcached"]


def test_an_incidents_tags_reach_its_lesson_as_written(service: MemoryService, tenant: str) -> None:
    incident = parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": "INC-53",
            "title": "Checkout outage",
            "closed_at": "2026-11-20T10:00:00Z",
            "findings": [
                {
                    "finding_id": "f1",
                    "status": "corroborated",
                    "title": TITLE,
                    "summary": SUMMARY,
                    "tags": ["redis", "service-discovery"],
                }
            ],
        }
    )
    lesson = record_incident(service, incident)[0].entry
    assert service.get_entry(tenant, lesson.entry_id).tags == ["redis", "service-discovery"]


def test_a_lake_moved_to_another_organization_keeps_the_tags_as_written(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    written = service.record_entry(tenant, entry(TITLE, SUMMARY, tags=TAGS), context()).entry
    lines: list[str] = []
    transfer = LakeTransfer(service)
    transfer.export(tenant, lines.append)
    transfer.import_stream(other_tenant, read_stream(lines), rename=True)
    assert service.get_entry(other_tenant, written.entry_id).tags == TAGS
    assert service.repository.verify_projection(other_tenant).mismatches == []


def _legacy_created(admin_conn: psycopg.Connection[Any], tenant: str, tags: list[str]) -> Any:
    """An `entry_created` event as versions before migration 0041 wrote it: the index's
    tags only (stems), no `given_tags`."""
    entry_id = uuid.uuid4()
    admin_conn.execute(
        "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
        " actor, idempotency_key) VALUES (%s, %s, 'entry_created', 1, %s, 'admin', %s)",
        (
            tenant,
            entry_id,
            Jsonb(
                {
                    "title": TITLE,
                    "summary": SUMMARY,
                    "service": None,
                    "tags": tags_for([TITLE, SUMMARY], tags),
                    "origin": "admin",
                    "incident_id": None,
                    "kind": "durable",
                }
            ),
            f"legacy-{entry_id}",
        ),
    )
    admin_conn.commit()
    return entry_id


def test_stems_stored_before_0041_are_spelled_back_in_the_lakes_words(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # another lesson of the lake says "Redis" and "caching" in its text
    service.record_entry(
        tenant,
        entry(
            "Redis evictions emptied the session store",
            "Redis evicted session keys under memory pressure; caching was disabled for an hour.",
        ),
        context(),
    )
    legacy = _legacy_created(admin_conn, tenant, ["Redis", "evictions", "zookeeperish"])
    service.repository.rebuild_projection(tenant)
    # a word the lake holds comes back as that word; one no text holds stays the stem
    assert service.get_entry(tenant, legacy).tags == ["redis", "evictions", "zookeeperish"]
    # a row the backfill has not reached yet shows the stems, then the words
    admin_conn.execute(
        "UPDATE org_memory_entries SET given_tags = NULL WHERE tenant_id = %s AND entry_id = %s",
        (tenant, legacy),
    )
    admin_conn.commit()
    stems = [tokenize(word)[0] for word in ("Redis", "evictions", "zookeeperish")]
    assert stems[:2] == ["redi", "evict"]
    assert service.get_entry(tenant, legacy).tags == stems
    assert service.repository.verify_projection(tenant).mismatches == []  # not drift
    assert service.fill_given_tags(tenant) == 1
    assert service.fill_given_tags(tenant) == 0
    assert service.get_entry(tenant, legacy).tags == ["redis", "evictions", "zookeeperish"]
    assert service.repository.verify_projection(tenant).mismatches == []
