"""What every write shares: its event appended under its idempotency key (a repeated key
is a no-op that answers what the first write did), the entry locked unless the key was
applied already, and the organization registered. The write modules build on it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from grandbo.errors import (
    EntryNotActiveError,
    EntryNotFoundError,
)
from grandbo.memory.domain.models import (
    EntryStatus,
    EventType,
    MemoryEntry,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.repository.entries import (
    ENTRY_BY_ID_FOR_UPDATE,
    EntryReads,
)
from grandbo.storage.tenant_scope import Cursor


class EventWrites(EntryReads):
    """The event log's side of every write, in the write's own transaction."""

    def _append_event(
        self,
        cur: Cursor,
        tenant_id: str,
        entry_id: UUID,
        event_type: EventType,
        revision: int,
        payload: dict[str, Any],
        context: WriteContext,
    ) -> Any:
        cur.execute(
            "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
            " actor, idempotency_key) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING recorded_at",
            (
                tenant_id,
                entry_id,
                event_type.value,
                revision,
                Jsonb(payload),
                context.actor,
                context.idempotency_key,
            ),
        )
        row = cur.fetchone()
        return None if row is None else row["recorded_at"]

    def _already_applied(
        self, cur: Cursor, tenant_id: str, context: WriteContext
    ) -> WriteOutcome | None:
        """The outcome of an earlier write with this idempotency key, if there was one."""
        previous = self._entry_for_key(cur, tenant_id, context.idempotency_key)
        return None if previous is None else WriteOutcome(entry=previous, applied=False)

    def _raced(self, cur: Cursor, tenant_id: str, context: WriteContext) -> WriteOutcome:
        done = self._already_applied(cur, tenant_id, context)
        assert done is not None
        return done

    def _lock_active_unless_applied(
        self, cur: Cursor, tenant_id: str, entry_id: UUID, context: WriteContext
    ) -> MemoryEntry | WriteOutcome:
        return self._lock_unless_applied(cur, tenant_id, entry_id, context, active=True)

    def _lock_unless_applied(
        self,
        cur: Cursor,
        tenant_id: str,
        entry_id: UUID,
        context: WriteContext,
        *,
        active: bool,
    ) -> MemoryEntry | WriteOutcome:
        """The entry (with `active`, only an active one), its row locked until commit; or
        the outcome of an earlier write with this key (a replay), looked for again once the
        lock is held: a concurrent delivery of the same key may have committed while this
        one waited."""
        if (done := self._already_applied(cur, tenant_id, context)) is not None:
            return done
        cur.execute(ENTRY_BY_ID_FOR_UPDATE, (tenant_id, entry_id))
        row = cur.fetchone()
        if row is None:
            raise EntryNotFoundError(entry_id)
        if (done := self._already_applied(cur, tenant_id, context)) is not None:
            return done
        entry = MemoryEntry.model_validate(row)
        if entry.status is EntryStatus.REDACTED or (
            active and entry.status is not EntryStatus.ACTIVE
        ):
            raise EntryNotActiveError(entry_id, entry.status.value)
        return entry

    def _register_tenant(self, cur: Cursor, tenant_id: str) -> None:
        cur.execute(
            "INSERT INTO org_memory_tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING",
            (tenant_id,),
        )
        cur.execute(
            "INSERT INTO org_memory_tenant_stats (tenant_id, active_entries, active_tag_total)"
            " VALUES (%s, 0, 0) ON CONFLICT (tenant_id) DO NOTHING",
            (tenant_id,),
        )
