"""The organization's query rate and its log's day bound (migration 0034's settings).

The questions themselves are counted in the answering process (`grandbo.runtime.admission`,
issue 51): 0034's `grandbo_admit_query` on the writer is no longer called, so no question
waits on the writer."""

from __future__ import annotations

import psycopg
from psycopg import sql

from grandbo.memory.domain.models import DEFAULT_EPISODIC_TTL_DAYS
from grandbo.storage.tenant_scope import TenantScopedRepository


class QueryRate(TenantScopedRepository):
    """The organization's query rate and its log's bound per day."""

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
