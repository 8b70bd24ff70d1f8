"""Episodic and durable memory (issue 14, item 3): episodic entries expire (30 days unless
the organization says otherwise), stop being served, are retired by the sweeper through an
event, and can be promoted to durable; all of it replays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from grandbo.errors import EntryNotActiveError, InvalidInputError
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.models import DEFAULT_EPISODIC_TTL_DAYS, EntryStatus, Kind
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import context, entry

TOPIC = "the payments deploy was rolled back after checkout errors spiked"
ROLLBACK = entry(
    "Deploy 4812 rolled back",
    "The payments deploy 4812 was rolled back after checkout errors spiked.",
    kind="episodic",
)


def at(service: MemoryService, when: datetime) -> MemoryService:
    """The same store, seen from another moment (an injected clock)."""
    return MemoryService(service.repository, service.provider, clock=lambda: when)


def test_an_episodic_entry_expires_stops_being_served_and_is_retired_by_an_event(
    service: MemoryService, tenant: str
) -> None:
    created = service.record_entry(tenant, ROLLBACK, context()).entry
    durable = service.record_entry(
        tenant,
        entry("Payments rollback runbook", "Roll the payments deploy back first."),
        context(),
    ).entry
    assert created.kind is Kind.EPISODIC
    assert created.expires_at == created.created_at + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS)
    assert durable.kind is Kind.DURABLE
    assert durable.expires_at is None
    service.embed_pending(tenant)
    now = datetime.now(UTC)
    hits = service.query_org_memory(tenant, TOPIC).hits
    assert {h.entry_id for h in hits} == {created.entry_id, durable.entry_id}
    assert next(h for h in hits if h.entry_id == created.entry_id).kind is Kind.EPISODIC

    later = at(service, now + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1))
    # past its expiry it is not served, even before the sweeper comes by
    assert [h.entry_id for h in later.query_org_memory(tenant, TOPIC).hits] == [durable.entry_id]
    assert at(service, now + timedelta(days=1)).retire_expired(tenant) == 0
    assert later.retire_expired(tenant) == 1
    assert later.retire_expired(tenant) == 0
    assert service.get_entry(tenant, created.entry_id).status is EntryStatus.RETIRED
    report = service.repository.verify_projection(tenant)
    assert report.mismatches == []  # the expiry and the retirement replay
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, created.entry_id).expires_at == created.expires_at


def test_the_lifetime_is_the_organizations_and_promotion_keeps_an_entry(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    assert service.set_episodic_ttl_days(tenant, 7) == 7
    for bad in (0, 3651, "7", True, 7.5):
        with pytest.raises(InvalidInputError):
            service.set_episodic_ttl_days(tenant, bad)
    short = service.record_entry(tenant, ROLLBACK, context()).entry
    assert short.expires_at == short.created_at + timedelta(days=7)
    other = service.record_entry(other_tenant, ROLLBACK, context()).entry  # its own default
    assert other.expires_at == other.created_at + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS)

    promoted = service.promote_entry(tenant, short.entry_id, context())
    assert promoted.applied
    assert (promoted.entry.kind, promoted.entry.expires_at) == (Kind.DURABLE, None)
    assert service.promote_entry(tenant, short.entry_id, context()).applied is False
    assert at(service, datetime.now(UTC) + timedelta(days=365)).retire_expired(tenant) == 0
    assert service.repository.verify_projection(tenant).mismatches == []
    service.retire_entry(other_tenant, other.entry_id, "wrong", context())
    with pytest.raises(EntryNotActiveError):
        service.promote_entry(other_tenant, other.entry_id, context())


def test_an_incident_finding_may_be_episodic(
    service: MemoryService, repository: MemoryRepository, tenant: str
) -> None:
    incident = parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": "INC-77",
            "title": "Checkout errors",
            "closed_at": "2026-11-29T10:00:00Z",
            "findings": [
                {
                    "finding_id": "f1",
                    "status": "corroborated",
                    "title": "Connection pool exhausted by a batch job",
                    "summary": "A nightly batch job held every pooled connection for minutes.",
                },
                {
                    "finding_id": "f2",
                    "status": "corroborated",
                    "kind": "episodic",
                    "title": "Deploy 4812 rolled back",
                    "summary": "The deploy was rolled back while the pool was investigated.",
                },
            ],
        }
    )
    kinds = [outcome.entry.kind for outcome in record_incident(service, incident)]
    assert kinds == [Kind.DURABLE, Kind.EPISODIC]
    assert repository.verify_projection(tenant).mismatches == []
