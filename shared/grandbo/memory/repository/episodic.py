"""Episodic entries' lifetime: the organization's episodic lifetime (days from creation),
an entry promoted to durable (it no longer expires), and the entries past their expiry
(the sweeper retires them)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from grandbo.memory.domain.models import (
    DEFAULT_EPISODIC_TTL_DAYS,
    EventType,
    Kind,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.repository.entries import (
    COUNT_EXPIRED,
)
from grandbo.memory.repository.events import EventWrites
from grandbo.storage.tenant_scope import Cursor, TenantLock


class EpisodicWrites(EventWrites):
    """The lifetime of episodic entries."""

    @staticmethod
    def _episodic_ttl_days(cur: Cursor, tenant_id: str) -> int:
        cur.execute(
            "SELECT episodic_ttl_days FROM org_memory_tenant_settings WHERE tenant_id = %s",
            (tenant_id,),
        )
        row = cur.fetchone()
        return DEFAULT_EPISODIC_TTL_DAYS if row is None else int(row["episodic_ttl_days"])

    def set_episodic_ttl_days(self, tenant_id: str, days: int) -> None:
        """How long this organization's new episodic entries are served (from creation)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings (tenant_id, episodic_ttl_days)"
                " VALUES (%s, %s) ON CONFLICT (tenant_id)"
                " DO UPDATE SET episodic_ttl_days = excluded.episodic_ttl_days",
                (tenant_id, days),
            )

    def episodic_ttl_days(self, tenant_id: str) -> int:
        with self._tenant_scope(tenant_id) as cur:
            return self._episodic_ttl_days(cur, tenant_id)

    def promote_entry(self, tenant_id: str, entry_id: UUID, context: WriteContext) -> WriteOutcome:
        """An active episodic entry becomes durable: it no longer expires."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            current = self._lock_active_unless_applied(cur, tenant_id, entry_id, context)
            if isinstance(current, WriteOutcome):
                return current
            if current.kind is Kind.DURABLE:
                return WriteOutcome(entry=current, applied=False)
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, EventType.PROMOTED, current.revision, {}, context
            )
            if recorded_at is None:
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET kind = 'durable', expires_at = NULL"
                " WHERE tenant_id = %s AND entry_id = %s",
                (tenant_id, entry_id),
            )
            return WriteOutcome(entry=self._get(cur, tenant_id, entry_id), applied=True)

    def expired_entry_ids(self, tenant_id: str, now: Any, limit: int = 500) -> list[UUID]:
        """Active episodic entries past their expiry, oldest first."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s"
                " AND status = 'active' AND kind = 'episodic' AND expires_at <= %s"
                " ORDER BY expires_at LIMIT %s",
                (tenant_id, now, limit),
            )
            return [row["entry_id"] for row in cur]

    def count_expired(self, tenant_id: str, now: Any) -> int:
        """Active episodic entries past their expiry."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(COUNT_EXPIRED, (tenant_id, now))
            row = cur.fetchone()
            return 0 if row is None else int(row["n"])
