"""Thin entries are refused (issue 14, item 4) on the real database: a create, a correction
or an incident's corroborated finding below the minimum of informative content
(`grandbo.memory.domain.content`) is a 4xx naming `summary` and what is missing, and nothing of
it is stored."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.errors import InvalidEventError, InvalidInputError
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.service import MemoryService

from .helpers import context, entry

GOOD = entry(
    "PgBouncer pool exhausted on checkout-api",
    "Doubling gunicorn workers without raising default_pool_size saturated the pool.",
    service="checkout-api",
)
THIN = [
    pytest.param(entry("Network issue", "network issue again"), "too short", id="short"),
    pytest.param(
        entry("Database outage", "it was the one that was down and then it was not"),
        "2 distinct informative tags (databas, outag)",
        id="stopwords",
    ),
    pytest.param(
        entry("Timeouts", " ".join(["timeout"] * 12)),
        "1 distinct informative tag (timeout)",
        id="one-word-repeated",
    ),
]


def _count(admin_conn: psycopg.Connection[Any], table: str, tenant: str) -> int:
    row = admin_conn.execute(
        f"SELECT count(*) FROM {table} WHERE tenant_id = %s",  # noqa: S608 - fixed table names
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(("thin", "missing"), THIN)
def test_a_thin_entry_is_refused_naming_what_is_missing_and_nothing_is_stored(
    service: MemoryService,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    thin: dict[str, Any],
    missing: str,
) -> None:
    with pytest.raises(InvalidInputError) as error:
        service.record_entry(tenant, thin, context())
    assert error.value.field == "summary"
    assert missing in error.value.message
    with pytest.raises(InvalidInputError):  # an incident's findings, one transaction
        service.record_entries(tenant, [(GOOD, context()), (thin, context())])
    for table in ("org_memory_events", "org_memory_entries", "org_memory_tag_stats"):
        assert _count(admin_conn, table, tenant) == 0


@pytest.mark.parametrize(("thin", "missing"), THIN)
def test_a_thin_correction_is_refused_and_the_entry_keeps_its_text(
    service: MemoryService,
    tenant: str,
    admin_conn: psycopg.Connection[Any],
    thin: dict[str, Any],
    missing: str,
) -> None:
    created = service.record_entry(tenant, GOOD, context()).entry
    with pytest.raises(InvalidInputError) as error:
        service.correct_entry(tenant, created.entry_id, thin, context(), expected_revision=1)
    assert error.value.field == "summary"
    assert missing in error.value.message
    assert service.get_entry(tenant, created.entry_id) == created
    assert _count(admin_conn, "org_memory_events", tenant) == 1


def test_an_entry_just_above_the_minimum_is_stored(service: MemoryService, tenant: str) -> None:
    borderline = entry("Disk full", "WAL volume filled while the replica was down")
    outcome = service.record_entry(tenant, borderline, context())
    assert outcome.applied
    assert outcome.entry.summary == borderline["summary"]


def _incident(tenant: str, *findings: tuple[str, str, str, str]) -> Any:
    return parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": "INC-3001",
            "title": "Checkout errors",
            "closed_at": "2026-11-29T10:00:00Z",
            "findings": [
                {"finding_id": fid, "status": status, "title": title, "summary": summary}
                for fid, status, title, summary in findings
            ],
        }
    )


def test_an_incident_with_one_thin_corroborated_finding_stores_none_of_them(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    incident = _incident(
        tenant,
        ("f1", "corroborated", GOOD["title"], GOOD["summary"]),
        ("f2", "corroborated", "Network issue", "network issue again"),
    )
    with pytest.raises(InvalidEventError, match=r"findings\[f2\]\.summary: is too short"):
        record_incident(service, incident)
    assert _count(admin_conn, "org_memory_events", tenant) == 0


def test_a_thin_hypothesis_is_dropped_not_refused(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """Only corroborated findings become entries, so only they must carry enough content."""
    incident = _incident(
        tenant,
        ("f1", "corroborated", GOOD["title"], GOOD["summary"]),
        ("h1", "hypothesis", "Network issue", "network issue again"),
    )
    assert [o.applied for o in record_incident(service, incident)] == [True]
    assert _count(admin_conn, "org_memory_entries", tenant) == 1
