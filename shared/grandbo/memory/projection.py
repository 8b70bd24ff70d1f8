"""The projection as a pure fold over events: what `org_memory_entries` must equal.

The write path updates the projection inline with SQL; `grandbo rebuild --verify` replays
the events through this fold and compares, so the two are checked against each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from grandbo.memory.models import EntryStatus, EventType, Kind, Origin, Verdict


@dataclass(frozen=True, slots=True)
class StoredEvent:
    entry_id: UUID
    event_type: EventType
    revision: int
    payload: dict[str, Any]
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class ProjectedEntry:
    entry_id: UUID
    title: str
    summary: str
    tags: tuple[str, ...]
    service: str | None
    origin: Origin
    status: EntryStatus
    revision: int
    incident_id: str | None
    superseded_by: UUID | None
    created_at: datetime
    updated_at: datetime
    helpful_count: int = 0
    not_helpful_count: int = 0
    misleading_count: int = 0
    kind: Kind = Kind.DURABLE
    expires_at: datetime | None = None


def _uuid(value: Any) -> UUID | None:
    return None if value is None else UUID(str(value))


def apply_event(state: dict[UUID, ProjectedEntry], event: StoredEvent) -> None:
    """Fold one event into `state` (entry id -> entry)."""
    p = event.payload
    if event.event_type is EventType.CREATED:
        kind = Kind(p.get("kind", Kind.DURABLE.value))
        ttl_days = p.get("ttl_days")
        state[event.entry_id] = ProjectedEntry(
            entry_id=event.entry_id,
            title=p["title"],
            summary=p["summary"],
            tags=tuple(p["tags"]),
            service=p.get("service"),
            origin=Origin(p["origin"]),
            status=EntryStatus.ACTIVE,
            revision=event.revision,
            incident_id=p.get("incident_id"),
            superseded_by=None,
            created_at=event.recorded_at,
            updated_at=event.recorded_at,
            kind=kind,
            expires_at=(
                event.recorded_at + timedelta(days=int(ttl_days))
                if kind is Kind.EPISODIC and ttl_days is not None
                else None
            ),
        )
        return
    current = state[event.entry_id]
    if event.event_type is EventType.PROMOTED:  # kept from now on; the text stays
        state[event.entry_id] = replace(current, kind=Kind.DURABLE, expires_at=None)
        return
    if event.event_type is EventType.FEEDBACK:  # counted; the text and its dates stay
        counter = f"{Verdict(p['verdict']).value}_count"
        state[event.entry_id] = replace(current, **{counter: getattr(current, counter) + 1})
        return
    if event.event_type is EventType.CORRECTED:
        state[event.entry_id] = replace(
            current,
            title=p["title"],
            summary=p["summary"],
            tags=tuple(p["tags"]),
            service=p.get("service"),
            origin=Origin.CORRECTION,
            revision=event.revision,
            updated_at=event.recorded_at,
        )
    elif event.event_type is EventType.RETIRED:
        state[event.entry_id] = replace(
            current, status=EntryStatus.RETIRED, updated_at=event.recorded_at
        )
    elif event.event_type is EventType.SUPERSEDED:
        state[event.entry_id] = replace(
            current,
            status=EntryStatus.SUPERSEDED,
            superseded_by=_uuid(p.get("superseded_by")),
            updated_at=event.recorded_at,
        )


def replay(events: Iterable[StoredEvent]) -> dict[UUID, ProjectedEntry]:
    state: dict[UUID, ProjectedEntry] = {}
    for event in events:
        apply_event(state, event)
    return state
