"""The retrieval log's SQL: one self-scoped statement per retrieval written (migration
0032's grandbo_log_retrieval), the newest first read back, the expired forgotten."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import psycopg

from grandbo.errors import StoreUnavailableError
from grandbo.memory.models import DEFAULT_EPISODIC_TTL_DAYS
from grandbo.memory.retrievals import (
    RETRIEVAL_DAYS,
    HitEntry,
    IncidentAsked,
    IncidentVerdict,
    Retrieval,
    RetrievalHit,
    RetrievalRecord,
)
from grandbo.storage.tenant_scope import TenantScopedRepository
from grandbo.tenancy import require_tenant


class RetrievalLog(TenantScopedRepository):
    """Write, list and forget an organization's retrievals."""

    def log_retrievals(self, records: Sequence[RetrievalRecord]) -> None:
        """Write retrievals, of any tenants, in one round trip: each its own self-scoped
        statement (grandbo_log_retrieval sets its tenant), pipelined by executemany."""
        if not records:
            return
        if not self._conn.autocommit:  # inside a caller's transaction it would stay open
            raise RuntimeError("the retrieval log needs an autocommit connection")
        rows = [
            (
                require_tenant(r.tenant_id),
                r.at,
                r.caller,
                r.incident_id,
                r.topic,
                json.dumps([hit.model_dump(mode="json") for hit in r.hits]),
                r.latency_ms,
                r.no_precedent,
            )
            for r in records
        ]
        try:
            with self._conn.cursor() as cur:
                cur.executemany(
                    "SELECT grandbo_log_retrieval(%s, %s, %s, %s, %s, %s::jsonb, %s, %s)", rows
                )
        except psycopg.OperationalError as exc:
            self._discard_unless_idle()
            raise StoreUnavailableError(str(exc)) from exc

    def retrievals(
        self,
        tenant_id: str,
        *,
        incident_id: str | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Retrieval]:
        """The organization's retrievals newest first (one incident's, where named), those
        before the (time, id) cursor `before` if given: ties in time are kept in id order,
        so no page skips a row."""
        at, retrieval_id = before if before is not None else (None, None)
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT retrieval_id, at, caller, incident_id, topic, hits, latency_ms,"
                " no_precedent FROM org_memory_retrievals"
                " WHERE tenant_id = %s AND (%s::text IS NULL OR incident_id = %s)"
                " AND (%s::timestamptz IS NULL OR (at, retrieval_id) < (%s, %s::uuid))"
                " ORDER BY at DESC, retrieval_id DESC LIMIT %s",
                (tenant_id, incident_id, incident_id, at, at, retrieval_id, limit),
            )
            return [
                Retrieval(**{**row, "hits": [RetrievalHit.model_validate(h) for h in row["hits"]]})
                for row in cur.fetchall()
            ]

    def hit_entries(self, tenant_id: str, ids: list[UUID]) -> dict[UUID, HitEntry]:
        """The entries of these ids as they stand now: title and status (a redacted
        entry's title is gone with its text)."""
        if not ids:
            return {}
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id, CASE WHEN status = 'redacted' THEN NULL ELSE title END"
                " AS title, status FROM org_memory_entries"
                " WHERE tenant_id = %s AND entry_id = ANY(%s)",
                (tenant_id, ids),
            )
            return {
                row["entry_id"]: HitEntry(title=row["title"], status=row["status"]) for row in cur
            }

    def incident_verdicts(self, tenant_id: str, incident_id: str) -> list[IncidentVerdict]:
        """The verdicts given during the incident, oldest first (at most 500)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id, payload->>'verdict' AS verdict, payload->>'note' AS note,"
                " actor, recorded_at FROM org_memory_events"
                " WHERE tenant_id = %s AND event_type = 'feedback_recorded'"
                "   AND payload->>'incident_id' = %s"
                " ORDER BY recorded_at, event_id LIMIT 500",
                (tenant_id, incident_id),
            )
            return [IncidentVerdict.model_validate(row) for row in cur]

    def retrieval_incidents(self, tenant_id: str, limit: int) -> list[IncidentAsked]:
        """The incidents whose agent asked memory, the latest asked first."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT incident_id, count(*) AS asked,"
                " count(*) FILTER (WHERE jsonb_array_length(hits) = 0) AS unanswered,"
                " min(at) AS first_at, max(at) AS last_at"
                " FROM org_memory_retrievals"
                " WHERE tenant_id = %s AND incident_id IS NOT NULL"
                " GROUP BY incident_id ORDER BY max(at) DESC, incident_id LIMIT %s",
                (tenant_id, limit),
            )
            return [IncidentAsked.model_validate(row) for row in cur]

    def forget_retrievals(self, tenant_id: str) -> int:
        """Delete the organization's retrievals past its retention; how many."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "DELETE FROM org_memory_retrievals WHERE tenant_id = %s"
                " AND at < now() - make_interval(days => coalesce(("
                "   SELECT retrieval_days FROM org_memory_tenant_settings"
                "   WHERE tenant_id = %s), %s))",
                (tenant_id, tenant_id, RETRIEVAL_DAYS),
            )
            return cur.rowcount

    def retrieval_days(self, tenant_id: str) -> int:
        """How long the organization keeps its retrievals (RETRIEVAL_DAYS unless set)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT retrieval_days FROM org_memory_tenant_settings WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            days = None if row is None else row["retrieval_days"]
            return RETRIEVAL_DAYS if days is None else int(days)

    def set_retrieval_days(self, tenant_id: str, days: int) -> None:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings"
                " (tenant_id, episodic_ttl_days, retrieval_days) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id) DO UPDATE SET retrieval_days = excluded.retrieval_days",
                (tenant_id, DEFAULT_EPISODIC_TTL_DAYS, days),
            )
