"""Offboarding: every row of an organization, in every table that holds one, counted or
deleted. The tables come from the catalog (every table of the schema with a `tenant_id`
column, partitions through their parent, the spent nonces of signed requests aside: they
hold no memory, and must outlive a purge so no request signed before it can be replayed
after), so one added later is never forgotten; the
deletion is `grandbo_purge_tenant` (migration 0020), the one path the event log's and
the topology's never-delete rules let through.
"""

from __future__ import annotations

from psycopg import sql

from grandbo.storage.tenant_scope import TenantLock, TenantScopedRepository

# the tables a purge empties, as grandbo_purge_tenant reads them (migration 0020)
_TENANT_TABLES = "SELECT name FROM grandbo_tenant_tables() AS name"


class OrganizationPurge(TenantScopedRepository):
    """Count an organization's rows, or delete them all in one transaction."""

    def organization_rows(self, tenant_id: str) -> dict[str, int]:
        """How many rows the organization has in each tenant-scoped table."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(_TENANT_TABLES)
            tables = [row["name"] for row in cur.fetchall()]
            counts = {}
            for table in tables:
                cur.execute(
                    sql.SQL("SELECT count(*) AS n FROM {} WHERE tenant_id = %s").format(
                        sql.Identifier(table)
                    ),
                    (tenant_id,),
                )
                row = cur.fetchone()
                counts[table] = 0 if row is None else int(row["n"])
            return counts

    def last_event_id(self, tenant_id: str) -> int:
        """The organization's latest event (0 for none): ids are never reused, so any
        write since a purge request, a purge included, moves it."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT coalesce(max(event_id), 0) AS last FROM org_memory_events"
                " WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["last"])

    def purge_organization(self, tenant_id: str) -> dict[str, int]:
        """Delete every row of the organization, under its exclusive lock (writers of the
        organization wait, then find nothing); the rows deleted, per table."""
        with self._tenant_scope(tenant_id, lock=TenantLock.EXCLUSIVE) as cur:
            cur.execute("SELECT table_name, deleted FROM grandbo_purge_tenant(%s)", (tenant_id,))
            return {row["table_name"]: int(row["deleted"]) for row in cur.fetchall()}
