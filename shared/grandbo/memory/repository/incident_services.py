"""What the learned graph is made of, read from memory: the (incident, service) pairs of
the entry events (to verify the graph or backfill it) and the services and tags of the
active entries (to review their staleness)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from grandbo.memory.models import EntryStatus, EventType
from grandbo.storage.tenant_scope import TenantScopedRepository


class IncidentServiceReads(TenantScopedRepository):
    def incident_services(self, tenant_id: str) -> list[tuple[str, str, datetime]]:
        """(incident id, service, first recorded) of every entry created with both."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT payload->>'incident_id' AS incident, payload->>'service' AS service,"
                " min(recorded_at) AS recorded_at FROM org_memory_events"
                " WHERE tenant_id = %s AND event_type = %s"
                "   AND payload->>'incident_id' IS NOT NULL AND payload->>'service' IS NOT NULL"
                " GROUP BY 1, 2 ORDER BY 1, 2",
                (tenant_id, EventType.CREATED.value),
            )
            return [(row["incident"], row["service"], row["recorded_at"]) for row in cur]

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
