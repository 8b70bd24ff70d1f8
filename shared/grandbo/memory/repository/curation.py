"""What a person curating an organization's memory reads: the entries by filter, one
entry's event history, growth per week, pairs of entries that may say one thing, and
the pairs a person said are distinct (`grandbo.memory.curation.curator`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import sql

from grandbo.memory.domain.models import MemoryEntry
from grandbo.memory.repository.entries import SELECT_ENTRIES, EntryReads
from grandbo.memory.repository.search import VECTOR_LEG_SETTINGS
from grandbo.memory.repository.writes import EntryWrites
from grandbo.storage.tenant_scope import Cursor


@dataclass(frozen=True, slots=True)
class CatalogFilter:
    """Which entries a page lists; None: any."""

    status: str | None = None
    kind: str | None = None
    service: str | None = None
    origin: str | None = None
    text: str | None = None  # a substring of the title or the summary, any case
    words: tuple[str, ...] = ()  # each in the title, the summary or the service, any case


def _like(text: str) -> str:
    """`text` as an ILIKE pattern matching it literally anywhere."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# The nearest other active entries of each of the latest active entries with a current
# vector, within `max_distance`: the pairs a looser rule than the automatic one may call
# one lesson (grandbo.memory.curation.curator). Each pair once (a < b), never one marked distinct.
_NEAR_PAIRS = (
    "WITH latest AS ("
    "   SELECT entry_id, embedding FROM org_memory_entries"
    "   WHERE tenant_id = %(tenant)s AND status = 'active' AND embed_rev = %(rev)s"
    "   ORDER BY created_at DESC, entry_id LIMIT %(scan)s)"
    " SELECT DISTINCT least(l.entry_id, n.entry_id) AS a, greatest(l.entry_id, n.entry_id) AS b,"
    "   n.distance"
    " FROM latest l CROSS JOIN LATERAL ("
    "   SELECT o.entry_id, o.embedding <=> l.embedding AS distance FROM org_memory_entries o"
    "   WHERE o.tenant_id = %(tenant)s AND o.status = 'active' AND o.embed_rev = %(rev)s"
    "     AND o.entry_id <> l.entry_id"
    "   ORDER BY o.embedding <=> l.embedding LIMIT %(neighbours)s) n"
    " WHERE n.distance <= %(max_distance)s AND NOT EXISTS ("
    "   SELECT 1 FROM org_memory_distinct_pairs d WHERE d.tenant_id = %(tenant)s"
    "     AND d.entry_a = least(l.entry_id, n.entry_id)"
    "     AND d.entry_b = greatest(l.entry_id, n.entry_id))"
    " ORDER BY n.distance, a, b"
)


_ENTRY_EVENTS = (
    "SELECT event_id, event_type, revision, payload, actor, idempotency_key, recorded_at"
    " FROM org_memory_events WHERE tenant_id = %s AND entry_id = %s"
)


class CurationReads(EntryReads):
    """Reads for the curation console, and the distinct verdicts it records."""

    def entry_catalog(
        self,
        tenant_id: str,
        where: CatalogFilter,
        after: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[MemoryEntry]:
        """Entries matching `where`, newest first, after the (created_at, entry_id) cursor."""
        conditions: list[sql.Composable] = [sql.SQL("TRUE")]
        params: list[Any] = [tenant_id]
        origin = where.origin
        if origin == "correction":
            # a correction keeps the entry's origin (migration 0029): corrected entries
            # are those past their first revision
            conditions.append(sql.SQL("revision > 1"))
            origin = None
        for column, value in (
            ("status", where.status),
            ("kind", where.kind),
            ("service", where.service),
            ("origin", origin),
        ):
            if value is not None:
                conditions.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
                params.append(value)
        if where.text:
            conditions.append(sql.SQL("(title ILIKE %s OR summary ILIKE %s)"))
            params += [_like(where.text)] * 2
        for word in where.words:
            conditions.append(
                sql.SQL("(title ILIKE %s OR summary ILIKE %s OR coalesce(service, '') ILIKE %s)")
            )
            params += [_like(word)] * 3
        if after is not None:
            conditions.append(sql.SQL("(created_at, entry_id) < (%s, %s)"))
            params += list(after)
        query = SELECT_ENTRIES + sql.SQL(" AND ").join(conditions)
        query += sql.SQL(" ORDER BY created_at DESC, entry_id DESC LIMIT %s")
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(query, [*params, limit])
            return [MemoryEntry.model_validate(row) for row in cur]

    def entry_events(
        self, tenant_id: str, entry_id: UUID, *, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """The entry's events, oldest first (the entry must be the tenant's), and how many
        were left out: beyond `limit` events, the first (its creation) and the latest
        `limit - 1` (its current revision among them), never the oldest `limit` alone."""
        with self._tenant_scope(tenant_id) as cur:
            self._get(cur, tenant_id, entry_id)
            cur.execute(
                "SELECT count(*) AS n FROM org_memory_events"
                " WHERE tenant_id = %s AND entry_id = %s",
                (tenant_id, entry_id),
            )
            row = cur.fetchone()
            total = 0 if row is None else int(row["n"])
            if total <= limit:
                cur.execute(
                    _ENTRY_EVENTS + " ORDER BY event_id LIMIT %s", (tenant_id, entry_id, limit)
                )
                return list(cur), 0
            cur.execute(_ENTRY_EVENTS + " ORDER BY event_id LIMIT 1", (tenant_id, entry_id))
            first = list(cur)
            cur.execute(
                _ENTRY_EVENTS + " ORDER BY event_id DESC LIMIT %s",
                (tenant_id, entry_id, max(limit - 1, 0)),
            )
            latest = list(cur)[::-1]
            return first + latest, total - len(first) - len(latest)

    def weekly_growth(self, tenant_id: str, since: datetime) -> list[dict[str, Any]]:
        """Per week since `since`: entries created by origin, and recurrences recorded.
        Weeks start on Monday 00:00 UTC whatever the session's TimeZone (the server's
        default, or the client's PGTZ), as `Curation.growth` counts them."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT date_trunc('week', recorded_at, 'UTC') AS week,"
                "   CASE WHEN event_type = 'entry_merged' THEN 'recurrence'"
                "        ELSE coalesce(payload->>'origin', 'unknown') END AS what,"
                "   count(*) AS n"
                " FROM org_memory_events WHERE tenant_id = %s AND recorded_at >= %s"
                "   AND event_type IN ('entry_created', 'entry_merged')"
                " GROUP BY 1, 2 ORDER BY 1, 2",
                (tenant_id, since),
            )
            return list(cur)

    def near_pairs(
        self, tenant_id: str, embed_rev: str, max_distance: float, *, scan: int, neighbours: int
    ) -> tuple[dict[UUID, MemoryEntry], list[tuple[UUID, UUID, float]]]:
        """Pairs of active entries within `max_distance` (never a pair marked distinct),
        among the nearest `neighbours` of the latest `scan` entries, nearest first."""
        with self._tenant_scope(tenant_id, VECTOR_LEG_SETTINGS) as cur:
            cur.execute(
                _NEAR_PAIRS,
                {
                    "tenant": tenant_id,
                    "rev": embed_rev,
                    "scan": scan,
                    "neighbours": neighbours,
                    "max_distance": max_distance,
                },
            )
            pairs = [(row["a"], row["b"], float(row["distance"])) for row in cur]
            ids = list({entry_id for a, b, _ in pairs for entry_id in (a, b)})
            return self._entries(cur, tenant_id, ids), pairs

    def entries_by_id(self, tenant_id: str, ids: Sequence[UUID]) -> dict[UUID, MemoryEntry]:
        with self._tenant_scope(tenant_id) as cur:
            return self._entries(cur, tenant_id, ids)

    def _entries(self, cur: Cursor, tenant_id: str, ids: Sequence[UUID]) -> dict[UUID, MemoryEntry]:
        if not ids:
            return {}
        cur.execute(SELECT_ENTRIES + sql.SQL("entry_id = ANY(%s)"), (tenant_id, list(ids)))
        return {row["entry_id"]: MemoryEntry.model_validate(row) for row in cur}

    def episodic_ttl_days(self, tenant_id: str) -> int:
        """How long the organization's new episodic entries are served."""
        with self._tenant_scope(tenant_id) as cur:
            return EntryWrites._episodic_ttl_days(cur, tenant_id)

    def mark_distinct(self, tenant_id: str, a: UUID, b: UUID, actor: str) -> bool:
        """Record that `a` and `b` are distinct lessons (both must be the tenant's);
        False if it was recorded before."""
        first, second = sorted((a, b))
        with self._tenant_scope(tenant_id) as cur:
            self._get(cur, tenant_id, first)
            self._get(cur, tenant_id, second)
            cur.execute(
                "INSERT INTO org_memory_distinct_pairs (tenant_id, entry_a, entry_b, actor)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant_id, first, second, actor),
            )
            return cur.rowcount == 1
