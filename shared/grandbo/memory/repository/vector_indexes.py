"""HNSW indexes for tenants past a size threshold; smaller tenants keep the exact scan.

An exact cosine scan reads every entry's 4 KB row: ~2 ms at 1,000 entries, ~12 ms at
5,000 on the benchmark machine, while a per-tenant HNSW index answers 5,000 entries in
~3 ms with recall 1.0 against the exact top 25 at `HNSW_EF_SEARCH` (docs/BENCHMARKS.md).
Past `HNSW_MIN_ENTRIES`, a tenant gets its own partial HNSW index
(`WHERE tenant_id = '<tenant>'`) on the partition of the entries table that holds it
(migration 0016: a statement is planned against its tenant's partition's indexes only),
which the planner uses only for that tenant's queries;
the vector leg runs with pgvector's iterative scan so filters (status, embed_rev,
service) never make it under-return. Index DDL needs the schema owner, so this runs from
the admin side (`grandbo index`; in AWS the index job function, every hour, so an
organization that grows past the threshold between deploys gets its index), never from a
request path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from psycopg import sql

from grandbo.storage.connections import connect
from grandbo.storage.tenant_scope import TenantScopedRepository

HNSW_MIN_ENTRIES = 2_000
# Candidates the graph search keeps: recall against the exact top 25 measured at 50,000
# entries: 0.92 at 40, 0.97 at 100, 1.00 at 200 (p95 2.5 / 3.1 / 6.4 ms).
HNSW_EF_SEARCH = 200
# The index's operator class, on the column's type (`halfvec(1024)`, migration 0015;
# grandbo.memory.repository.vectors binds every vector as that type). Defined here: this
# module imports nothing of the repository, which imports it (HNSW_EF_SEARCH).
COSINE_OPS = "halfvec_cosine_ops"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


def index_name(tenant_id: str) -> str:
    return "org_memory_entries_hnsw_" + hashlib.sha256(tenant_id.encode()).hexdigest()[:16]


def ensure_hnsw_indexes(
    admin_url: str,
    min_entries: int | None = None,
    *,
    progress: Callable[[Iterable[Any], int], Iterable[Any]] | None = None,
) -> list[str]:
    """Create the missing per-tenant HNSW indexes (concurrently); return the tenants indexed.

    `min_entries` defaults to HNSW_MIN_ENTRIES; an index left invalid by an interrupted
    build is dropped and built again. Each statement stands alone (a concurrent build runs
    outside any transaction block) and leaves nothing in the session, so the job behaves
    the same through RDS Proxy or a transaction pooler: its build memory is the owner's
    default (migration 0017), not a SET, and no statement is prepared (`connect`).
    """
    threshold = HNSW_MIN_ENTRIES if min_entries is None else min_entries
    created = []
    with connect(admin_url) as conn:
        sizes = _TenantSizes(conn)
        rows: list[tuple[str, str]] = []
        for (tenant_id,) in conn.execute(
            "SELECT tenant_id FROM org_memory_tenants ORDER BY tenant_id"
        ).fetchall():
            size, partition = sizes.size_and_partition(str(tenant_id))
            if size >= threshold and partition is not None:
                rows.append((str(tenant_id), partition))
        existing: dict[str, bool] = {
            str(row[0]): bool(row[1])
            for row in conn.execute(
                "SELECT c.relname, i.indisvalid FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE i.indrelid IN (SELECT inhrelid FROM pg_inherits"
                "   WHERE inhparent = 'org_memory_entries'::regclass)"
            )
        }
        for tenant_id, partition in rows if progress is None else progress(rows, len(rows)):
            name = index_name(tenant_id)
            if existing.get(name):
                continue
            if name in existing:  # a concurrent build cut short (a timeout) leaves it invalid
                conn.execute(
                    sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name))
                )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {partition}"
                    " USING hnsw (embedding {ops})"
                    " WITH (m = {m}, ef_construction = {ef}) WHERE tenant_id = {tenant}"
                ).format(
                    name=sql.Identifier(name),
                    partition=sql.Identifier(partition),
                    ops=sql.SQL(COSINE_OPS),
                    m=sql.Literal(HNSW_M),
                    ef=sql.Literal(HNSW_EF_CONSTRUCTION),
                    tenant=sql.Literal(tenant_id),
                )
            )
            created.append(tenant_id)
    return created


class _TenantSizes(TenantScopedRepository):
    """Each tenant's size and partition, read in the tenant's own scope: row-level
    security is forced on entries, and the schema owner running the index job is not a
    superuser in Aurora, so an unscoped read sees nothing."""

    def size_and_partition(self, tenant_id: str) -> tuple[int, str | None]:
        """A tenant's active entries and the partition that holds them (migration 0016)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT count(*) AS active,"
                " (SELECT relname FROM pg_class WHERE oid = min(e.tableoid)) AS partition"
                " FROM org_memory_entries e WHERE e.tenant_id = %s AND e.status = 'active'",
                (tenant_id,),
            )
            row = cur.fetchone()
        assert row is not None
        return row["active"], row["partition"]
