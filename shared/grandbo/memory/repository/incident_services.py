"""What the learned graph is made of, read from memory: the (incident, service) pairs of
the entry events (to verify the graph or backfill it) and the services and tags of the
active entries (to review their staleness)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from grandbo.memory.domain.models import EntryStatus, EventType
from grandbo.storage.tenant_scope import TenantScopedRepository


class IncidentServiceReads(TenantScopedRepository):
    def incident_services(self, tenant_id: str) -> list[tuple[str, str, datetime]]:
        """(incident id, service, first moment) of every entry created with both, and of
        every service its incident named of its own (`incident_services`, recorded with
        the incident's entries): the moment is the incident's (`incident_at`) where the
        event holds one and it is no later than the event, else the event's."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT payload->>'incident_id' AS incident, payload->>'service' AS service,"
                " payload->'incident_services' AS named, payload->>'incident_at' AS at,"
                " recorded_at FROM org_memory_events"
                " WHERE tenant_id = %s AND event_type = %s"
                "   AND payload->>'incident_id' IS NOT NULL"
                " ORDER BY event_id",
                (tenant_id, EventType.CREATED.value),
            )
            first: dict[tuple[str, str], datetime] = {}
            for row in cur:
                services = [row["service"]] if isinstance(row["service"], str) else []
                if isinstance(row["named"], list):
                    services += [s for s in row["named"] if isinstance(s, str) and s]
                moment = min(row["recorded_at"], _moment(row["at"]) or row["recorded_at"])
                for service in services:
                    pair = (row["incident"], service)
                    first[pair] = min(moment, first.get(pair, moment))
            return [(i, s, at) for (i, s), at in sorted(first.items())]

    def active_subjects(self, tenant_id: str) -> list[tuple[UUID, str, list[str]]]:
        """(entry id, service, tags) of every active entry about a service."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id, service, tags FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = %s AND service IS NOT NULL"
                " ORDER BY created_at, entry_id",
                (tenant_id, EntryStatus.ACTIVE.value),
            )
            return [(row["entry_id"], row["service"], list(row["tags"])) for row in cur]


def _moment(value: object) -> datetime | None:
    """An event's `incident_at` (ISO 8601 with a zone), None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None
