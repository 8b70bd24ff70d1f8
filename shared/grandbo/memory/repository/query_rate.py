"""How many queries a caller may ask per minute: migration 0034's grandbo_admit_query, one
self-scoped statement on the writer (nothing to pin an RDS Proxy connection), and the
organization's setting."""

from __future__ import annotations

import hashlib
from datetime import datetime

import psycopg
from psycopg import sql

from grandbo.memory.domain.models import DEFAULT_EPISODIC_TTL_DAYS
from grandbo.storage.tenant_scope import TenantScopedRepository

# org_memory_query_minutes.caller's bound (migration 0034)
MAX_CALLER_CHARS = 200


class QueryRate(TenantScopedRepository):
    """Admit a caller's query, or say how long it must wait; the organization's rate."""

    def admit_query(self, tenant_id: str, caller: str, at: datetime, default: int) -> int:
        """0 when the caller's query is within its organization's rate this minute (the
        organization's `query_rate_per_minute`, else `default`), else the seconds until
        the next minute. Counted whether admitted or not. On a schema before migration
        0034 (code deployed ahead of it) every query is admitted, as before."""
        try:
            return self._admit_query(tenant_id, caller, at, default)
        except psycopg.errors.UndefinedFunction:
            return 0

    def _admit_query(self, tenant_id: str, caller: str, at: datetime, default: int) -> int:
        if len(caller) > MAX_CALLER_CHARS:  # a person's long address: counted by its digest
            caller = "sha256:" + hashlib.sha256(caller.encode()).hexdigest()
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT grandbo_admit_query(%s, %s, %s, %s) AS wait",
                (tenant_id, caller, at, default),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["wait"])

    def query_rate_per_minute(self, tenant_id: str) -> int | None:
        """The organization's own query rate (None: the default, or a schema before 0034)."""
        return self._setting(tenant_id, "query_rate_per_minute")

    def retrieval_rows_per_day(self, tenant_id: str) -> int | None:
        """The organization's own bound on its log's rows per day (None: the default)."""
        return self._setting(tenant_id, "retrieval_rows_per_day")

    def _setting(self, tenant_id: str, column: str) -> int | None:
        query = sql.SQL("SELECT {} AS value FROM org_memory_tenant_settings WHERE tenant_id = %s")
        try:
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(query.format(sql.Identifier(column)), (tenant_id,))
                row = cur.fetchone()
                return None if row is None else row["value"]
        except psycopg.errors.UndefinedColumn:
            return None

    def set_log_bounds(
        self,
        tenant_id: str,
        *,
        query_rate_per_minute: int | None = None,
        retrieval_rows_per_day: int | None = None,
    ) -> None:
        """The organization's query rate and its log's rows per day, where given."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings (tenant_id, episodic_ttl_days,"
                " query_rate_per_minute, retrieval_rows_per_day) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (tenant_id) DO UPDATE SET"
                " query_rate_per_minute = coalesce(excluded.query_rate_per_minute,"
                "   org_memory_tenant_settings.query_rate_per_minute),"
                " retrieval_rows_per_day = coalesce(excluded.retrieval_rows_per_day,"
                "   org_memory_tenant_settings.retrieval_rows_per_day)",
                (
                    tenant_id,
                    DEFAULT_EPISODIC_TTL_DAYS,
                    query_rate_per_minute,
                    retrieval_rows_per_day,
                ),
            )
