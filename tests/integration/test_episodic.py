"""Episodic and durable memory (issue 14, item 3): episodic entries expire (30 days unless
the organization says otherwise), stop being served, are retired by the sweeper through an
event, and can be promoted to durable; all of it replays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from grandbo.errors import EntryNotActiveError, InvalidInputError
from grandbo.memory.domain.models import DEFAULT_EPISODIC_TTL_DAYS, EntryStatus, Kind
from grandbo.memory.incidents import parse_incident_closed, record_incident
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
        entry(
            "Payments rollback runbook",
            "Roll the payments deploy back first, then watch the checkout error rate.",
        ),
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


def test_expired_entries_never_take_a_live_entrys_place_before_the_sweep(
    service: MemoryService, tenant: str
) -> None:
    live = service.record_entry(
        tenant,
        entry("Payments rollback runbook", "Roll the payments deploy back when checkout fails."),
        context(),
    ).entry
    service.record_entries(
        tenant,
        [
            (
                entry(
                    f"Deploy {n} rolled back",
                    f"The payments deploy {n} was rolled back after checkout errors spiked.",
                    kind="episodic",
                ),
                context(),
            )
            for n in range(30)
        ],
    )
    service.embed_pending(tenant)
    later = at(service, datetime.now(UTC) + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1))
    answer = later.query_org_memory(tenant, TOPIC, limit=5)
    assert [h.entry_id for h in answer.hits] == [live.entry_id]


def test_the_vector_leg_reads_past_expired_entries_before_the_sweep(
    service: MemoryService, tenant: str
) -> None:
    """The vector leg on its own (a topic sharing no tag): expired entries, nearer than
    the live one, never take its one slot."""
    live = service.record_entry(
        tenant,
        entry(
            "Checkout rollback guide",
            "How the payments release was reverted safely after the canary failed.",
        ),
        context(),
    ).entry
    service.record_entries(
        tenant, [(ROLLBACK | {"title": f"Deploy {n}"}, context()) for n in range(8)]
    )
    service.embed_pending(tenant)
    provider = service.provider
    now = datetime.now(UTC) + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1)
    legs = service.repository.search(
        tenant,
        topic_tags=[],
        topic_vector=provider.embed([TOPIC])[0],
        embed_rev=provider.embed_rev,
        vector_cutoff=2.0,
        services=None,
        leg_limit=1,
        now=now,
    )
    assert legs.lexical == []
    assert [c.entry_id for c in legs.vector] == [live.entry_id]
    assert set(legs.entries) == {live.entry_id}


def test_the_sweeper_spares_an_entry_promoted_meanwhile_and_never_loops(
    service: MemoryService, repository: MemoryRepository, tenant: str, admin_conn: Any
) -> None:
    first, second = (service.record_entry(tenant, ROLLBACK, context()).entry for _ in range(2))
    future = datetime.now(UTC) + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1)
    service.promote_entry(tenant, first.entry_id, context())
    # the sweeper listed it before the promotion committed: rechecked under the row lock
    spared = repository.retire_entry(
        tenant, first.entry_id, "expired", context(), expired_by=future
    )
    assert spared.applied is False
    assert service.get_entry(tenant, first.entry_id).status is EntryStatus.ACTIVE
    assert at(service, future).retire_expired(tenant) == 1  # the other one
    # a drifted row no retirement changes (set active again behind the log) is tried once
    with admin_conn.transaction():
        admin_conn.execute(
            "UPDATE org_memory_entries SET status = 'active' WHERE tenant_id = %s"
            " AND entry_id = %s",
            (tenant, second.entry_id),
        )
    assert at(service, future).retire_expired(tenant) == 0


def test_a_backlog_of_expired_entries_is_counted_whole_and_worked_off_in_shares(
    service: MemoryService, tenant: str
) -> None:
    from grandbo.memory.curation.audit import audit

    service.record_entries(tenant, [(ROLLBACK, context()) for _ in range(520)])
    future = at(service, datetime.now(UTC) + timedelta(days=DEFAULT_EPISODIC_TTL_DAYS + 1))
    (finding,) = [f for f in audit(future, tenant).findings if f.check == "expired_active"]
    assert finding.count == 520
    assert future.retire_expired(tenant, limit=200) == 200
    assert future.retire_expired(tenant) == 320
