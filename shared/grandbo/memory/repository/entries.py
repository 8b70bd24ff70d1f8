"""Entry rows: the one column list every select, join and RETURNING of entries uses,
and the reads every other part of the repository builds on.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from psycopg import sql

from grandbo.errors import (
    EntryNotFoundError,
)
from grandbo.memory.domain.models import (
    MemoryEntry,
)
from grandbo.storage.tenant_scope import Cursor, TenantScopedRepository

# What a MemoryEntry is read from: every select, RETURNING and join of entries uses it.
ENTRY_COLUMNS = (
    "tenant_id",
    "entry_id",
    "title",
    "summary",
    "tags",
    "index_tags",
    "service",
    "origin",
    "status",
    "revision",
    "incident_id",
    "superseded_by",
    "created_at",
    "updated_at",
    "embed_rev",
    "embedded_revision",
    "helpful_count",
    "not_helpful_count",
    "misleading_count",
    "kind",
    "expires_at",
    "merged_into",
    "never_merge",
    "seen_count",
    "last_seen_at",
    "seen_in_incidents",
)


# A MemoryEntry field read from a column of another name: the tags as written are
# `given_tags` (migration 0041), the lexical index's stems are the column `tags`
COLUMN_OF = {"tags": "given_tags", "index_tags": "tags"}


def entry_columns(table: str | None = None) -> sql.Composable:
    prefix = () if table is None else (table,)
    return sql.SQL(", ").join(
        sql.SQL("{} AS {}").format(
            sql.Identifier(*prefix, COLUMN_OF.get(field, field)), sql.Identifier(field)
        )
        if field in COLUMN_OF
        else sql.Identifier(*prefix, field)
        for field in ENTRY_COLUMNS
    )


SELECT_ENTRIES = sql.SQL("SELECT {} FROM org_memory_entries WHERE tenant_id = %s AND ").format(
    entry_columns()
)
ENTRY_BY_ID = SELECT_ENTRIES + sql.SQL("entry_id = %s")
ENTRY_BY_ID_FOR_UPDATE = ENTRY_BY_ID + sql.SQL(" FOR UPDATE")
ENTRIES_BY_IDS = SELECT_ENTRIES + sql.SQL("entry_id = ANY(%s)")
ENTRIES_BY_KEYS = sql.SQL(
    "SELECT ev.idempotency_key AS created_by_key, {}"
    " FROM org_memory_events ev JOIN org_memory_entries e"
    "   ON e.tenant_id = ev.tenant_id AND e.entry_id = ev.entry_id"
    " WHERE ev.tenant_id = %s AND ev.idempotency_key = ANY(%s)"
).format(entry_columns("e"))
# Active episodic entries past their expiry (a partial index; usually none).
COUNT_EXPIRED = (
    "SELECT count(*) AS n FROM org_memory_entries WHERE tenant_id = %s"
    " AND status = 'active' AND kind = 'episodic' AND expires_at <= %s"
)
INSERT_NEW_ENTRY = sql.SQL(
    "INSERT INTO org_memory_entries (tenant_id, entry_id, title, summary, tags, given_tags,"
    " service, origin, status, revision, incident_id, created_at, updated_at, kind, expires_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'active', 1, %s, %s, %s, %s, %s) RETURNING {}"
).format(entry_columns())

# Set for the search's transaction. Tenants past the size threshold have an HNSW index


class EntryReads(TenantScopedRepository):
    """Entries by id, by the idempotency key that created them, and the tenants."""

    def get_entry(self, tenant_id: str, entry_id: UUID) -> MemoryEntry:
        with self._tenant_scope(tenant_id) as cur:
            return self._get(cur, tenant_id, entry_id)

    def _get(self, cur: Cursor, tenant_id: str, entry_id: UUID) -> MemoryEntry:
        cur.execute(
            ENTRY_BY_ID,
            (tenant_id, entry_id),
        )
        row = cur.fetchone()
        if row is None:
            raise EntryNotFoundError(entry_id)
        return MemoryEntry.model_validate(row)

    def _entries_for_keys(
        self, cur: Cursor, tenant_id: str, keys: Sequence[str]
    ) -> dict[str, MemoryEntry]:
        """The entries that earlier events with these idempotency keys wrote, by key."""
        cur.execute(ENTRIES_BY_KEYS, (tenant_id, list(keys)))
        return {row.pop("created_by_key"): MemoryEntry.model_validate(row) for row in cur}

    def _entry_for_key(
        self, cur: Cursor, tenant_id: str, idempotency_key: str
    ) -> MemoryEntry | None:
        return self._entries_for_keys(cur, tenant_id, [idempotency_key]).get(idempotency_key)

    def tenant_ids(self) -> list[str]:
        """Every tenant that has written memory (ids only; content stays behind RLS)."""
        with self._unscoped() as cur:
            cur.execute("SELECT tenant_id FROM org_memory_tenants ORDER BY tenant_id")
            return [row[0] for row in cur]
