"""The memory repository: the only place that knows Grandbo's schema and holds its SQL.

Every method runs in its own short transaction scoped to one tenant twice over: the
transaction-local `grandbo.tenant_id` setting that row-level security reads, and an
explicit `tenant_id = %s` predicate in every statement.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import psycopg
from pgvector import Vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from grandbo.errors import (
    EntryNotActiveError,
    EntryNotFoundError,
    RevisionConflictError,
)
from grandbo.models import (
    EmbedJob,
    EntryStatus,
    EntryText,
    EventType,
    MemoryEntry,
    NewEntry,
    Origin,
    WriteContext,
    WriteOutcome,
)
from grandbo.projection import ProjectedEntry, StoredEvent, replay
from grandbo.tenancy import require_tenant
from grandbo.vector_index import HNSW_EF_SEARCH

# BM25 over tag sets: tf is 1 (a tag is present or not), the document length is the
# entry's tag count. Standard Okapi constants.
BM25_K1 = 1.2
BM25_B = 0.75

# What a MemoryEntry is read from: every select, RETURNING and join of entries uses it.
_ENTRY_COLUMNS = (
    "tenant_id",
    "entry_id",
    "title",
    "summary",
    "tags",
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
)


def _entry_columns(table: str | None = None) -> sql.Composable:
    prefix = () if table is None else (table,)
    return sql.SQL(", ").join(sql.Identifier(*prefix, column) for column in _ENTRY_COLUMNS)


_SELECT_ENTRIES = sql.SQL("SELECT {} FROM org_memory_entries WHERE tenant_id = %s AND ").format(
    _entry_columns()
)
_ENTRY_BY_ID = _SELECT_ENTRIES + sql.SQL("entry_id = %s")
_ENTRY_BY_ID_FOR_UPDATE = _ENTRY_BY_ID + sql.SQL(" FOR UPDATE")
_ENTRIES_BY_IDS = _SELECT_ENTRIES + sql.SQL("entry_id = ANY(%s)")
_ENTRIES_BY_KEYS = sql.SQL(
    "SELECT ev.idempotency_key AS created_by_key, {}"
    " FROM org_memory_events ev JOIN org_memory_entries e"
    "   ON e.tenant_id = ev.tenant_id AND e.entry_id = ev.entry_id"
    " WHERE ev.tenant_id = %s AND ev.idempotency_key = ANY(%s)"
).format(_entry_columns("e"))
_INSERT_NEW_ENTRY = sql.SQL(
    "INSERT INTO org_memory_entries (tenant_id, entry_id, title, summary, tags,"
    " service, origin, status, revision, incident_id, created_at, updated_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, 'active', 1, %s, %s, %s) RETURNING {}"
).format(_entry_columns())

# Set for the search's transaction. Tenants past the size threshold have an HNSW index
# (grandbo.vector_index); for them the iterative scan keeps the filters from
# under-returning, and ef_search sets recall (measured in docs/BENCHMARKS.md).
_VECTOR_LEG_SETTINGS = {
    "hnsw.iterative_scan": "relaxed_order",
    "hnsw.ef_search": str(HNSW_EF_SEARCH),
}
# Cosine distance against vectors of the current embed_rev (a stored vector is always its
# entry's current revision's, by constraint: migration 0005). The cutoff applies after
# the nearest `limit` are found, so an index scan stops at `limit` instead of walking
# the graph for rows that will never pass the cutoff.
_VECTOR_LEG = (
    "SELECT entry_id, distance FROM ("
    "   SELECT entry_id, embedding <=> %(q)b AS distance FROM org_memory_entries"
    "   WHERE tenant_id = %(tenant)s AND status = 'active' AND embed_rev = %(rev)s"
    "     AND (%(services)s::text[] IS NULL OR service = ANY(%(services)s))"
    "   ORDER BY embedding <=> %(q)b LIMIT %(limit)s"
    " ) nearest WHERE distance < %(cutoff)s ORDER BY distance, entry_id"
)


def _returned_rows(cur: psycopg.Cursor[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every row an `executemany(..., returning=True)` returned, across its result sets."""
    while True:
        yield from cur.fetchall()
        if not cur.nextset():
            return


@dataclass(frozen=True, slots=True)
class LexicalCandidate:
    entry_id: UUID
    score: float
    shared_tags: list[str]


@dataclass(frozen=True, slots=True)
class VectorCandidate:
    entry_id: UUID
    distance: float


@dataclass(frozen=True, slots=True)
class _Corpus:
    """A tenant's BM25 statistics and the idf of the topic's tags it holds."""

    active_entries: int
    avgdl: float
    weights: dict[str, float]

    def shared_tags(self, entry_tags: Sequence[str]) -> list[str]:
        """The topic's tags this entry carries, rarest (heaviest) first."""
        shared = {tag for tag in entry_tags if tag in self.weights}
        return sorted(shared, key=lambda tag: (-self.weights[tag], tag))


@dataclass(frozen=True, slots=True)
class SearchLegs:
    """Both legs' candidates, the entries behind them and the tenant's vector coverage."""

    lexical: list[LexicalCandidate]
    vector: list[VectorCandidate]
    entries: dict[UUID, MemoryEntry]
    active_entries: int
    active_without_current_vector: int


@dataclass(frozen=True, slots=True)
class EntryForEmbedding:
    tenant_id: str
    entry_id: UUID
    revision: int
    title: str
    summary: str
    service: str | None


@dataclass(frozen=True, slots=True)
class ProjectionReport:
    tenant_id: str
    events: int
    entries: int
    mismatches: list[str]


class TenantScopedRepository:
    """One connection; every unit of work is a short transaction scoped to one tenant."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @contextmanager
    def _tenant_scope(
        self, tenant_id: str, settings: Mapping[str, str] | None = None
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A transaction bound to one tenant, plus any transaction-local `settings`."""
        tenant = require_tenant(tenant_id)
        local = {"grandbo.tenant_id": tenant, **(settings or {})}
        with self._conn.transaction(), self._conn.cursor(row_factory=dict_row) as cur:
            # one round trip: set_config(..., true) is SET LOCAL
            cur.execute(
                "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(local)),
                [value for item in local.items() for value in item],
            )
            yield cur


class MemoryRepository(TenantScopedRepository):
    """All reads and writes of memory entries, events and tag statistics."""

    # -- writes ------------------------------------------------------------------------

    def create_entry(
        self, tenant_id: str, entry: NewEntry, tags: Sequence[str], context: WriteContext
    ) -> WriteOutcome:
        """Record `entry_created` and project it, in one transaction; a repeated key is a no-op."""
        return self.create_entries(tenant_id, [(entry, tags, context)])[0]

    def create_entries(
        self,
        tenant_id: str,
        items: Sequence[tuple[NewEntry, Sequence[str], WriteContext]],
    ) -> list[WriteOutcome]:
        """Several entries (an incident's findings) in one transaction: all or none.

        A fixed number of statements whatever the batch size: earlier keys in one
        lookup, events and entries each in one pipelined `executemany`, tag statistics
        and postings each in one statement. A key seen before (earlier, twice in the
        batch, or written concurrently) yields the entry it created, `applied=False`.
        """
        with self._tenant_scope(tenant_id) as cur:
            self._register_tenant(cur, tenant_id)
            keys = [context.idempotency_key for _, _, context in items]
            known = self._entries_for_keys(cur, tenant_id, keys)
            fresh: dict[str, tuple[UUID, NewEntry, list[str], WriteContext]] = {}
            for entry, tags, context in items:
                key = context.idempotency_key
                if key not in known and key not in fresh:
                    fresh[key] = (uuid4(), entry, list(tags), context)
            recorded = self._append_created_events(cur, tenant_id, list(fresh.values()))
            created = self._insert_entries(
                cur,
                tenant_id,
                [(*item, recorded[key]) for key, item in fresh.items() if key in recorded],
            )
            self._count_tags(cur, tenant_id, [entry.tags for entry in created.values()], +1)
            self._post_tags(cur, tenant_id, list(created.values()))
            raced = [key for key in fresh if key not in recorded]
            if raced:  # concurrent deliveries of the same keys won the race
                known |= self._entries_for_keys(cur, tenant_id, raced)
            outcomes, reported = [], set()
            for key in keys:
                if key in recorded and key not in reported:
                    outcomes.append(WriteOutcome(entry=created[fresh[key][0]], applied=True))
                    reported.add(key)
                else:
                    previous = known.get(key) or created[fresh[key][0]]
                    outcomes.append(WriteOutcome(entry=previous, applied=False))
            return outcomes

    def _entries_for_keys(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, keys: Sequence[str]
    ) -> dict[str, MemoryEntry]:
        """The entries that earlier events with these idempotency keys wrote, by key."""
        cur.execute(_ENTRIES_BY_KEYS, (tenant_id, list(keys)))
        return {row.pop("created_by_key"): MemoryEntry.model_validate(row) for row in cur}

    def _append_created_events(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        fresh: Sequence[tuple[UUID, NewEntry, list[str], WriteContext]],
    ) -> dict[str, Any]:
        """`entry_created` events, in order; the keys that went in, with their timestamps."""
        if not fresh:
            return {}
        cur.executemany(
            "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
            " actor, idempotency_key) VALUES (%s, %s, %s, 1, %s, %s, %s)"
            " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING"
            " RETURNING idempotency_key, recorded_at",
            [
                (
                    tenant_id,
                    entry_id,
                    EventType.CREATED.value,
                    Jsonb(
                        {
                            "title": entry.title,
                            "summary": entry.summary,
                            "tags": tags,
                            "service": entry.service,
                            "origin": entry.origin.value,
                            "incident_id": entry.incident_id,
                        }
                    ),
                    context.actor,
                    context.idempotency_key,
                )
                for entry_id, entry, tags, context in fresh
            ],
            returning=True,
        )
        return {row["idempotency_key"]: row["recorded_at"] for row in _returned_rows(cur)}

    def _insert_entries(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        rows: Sequence[tuple[UUID, NewEntry, list[str], WriteContext, Any]],
    ) -> dict[UUID, MemoryEntry]:
        if not rows:
            return {}
        cur.executemany(
            _INSERT_NEW_ENTRY,
            [
                (
                    tenant_id,
                    entry_id,
                    entry.title,
                    entry.summary,
                    tags,
                    entry.service,
                    entry.origin.value,
                    entry.incident_id,
                    recorded_at,
                    recorded_at,
                )
                for entry_id, entry, tags, _, recorded_at in rows
            ],
            returning=True,
        )
        entries = (MemoryEntry.model_validate(row) for row in _returned_rows(cur))
        return {entry.entry_id: entry for entry in entries}

    def correct_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        text: EntryText,
        tags: Sequence[str],
        context: WriteContext,
        expected_revision: int | None = None,
    ) -> WriteOutcome:
        """A new revision of an active entry's text; its old vector stops being served."""
        with self._tenant_scope(tenant_id) as cur:
            if (done := self._already_applied(cur, tenant_id, context)) is not None:
                return done
            current = self._lock_active(cur, tenant_id, entry_id)
            if expected_revision is not None and expected_revision != current.revision:
                raise RevisionConflictError(entry_id, expected_revision, current.revision)
            revision = current.revision + 1
            payload = {
                "title": text.title,
                "summary": text.summary,
                "tags": list(tags),
                "service": text.service,
            }
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, EventType.CORRECTED, revision, payload, context
            )
            if recorded_at is None:  # a concurrent delivery of the same key won the race
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET title = %s, summary = %s, tags = %s,"
                " service = %s, origin = %s, revision = %s, updated_at = %s,"
                " embedding = NULL, embed_rev = NULL, embedded_revision = NULL,"
                " embedded_at = NULL"
                " WHERE tenant_id = %s AND entry_id = %s",
                (
                    text.title,
                    text.summary,
                    list(tags),
                    text.service,
                    Origin.CORRECTION.value,
                    revision,
                    recorded_at,
                    tenant_id,
                    entry_id,
                ),
            )
            self._count_tags(cur, tenant_id, [current.tags], -1)
            self._count_tags(cur, tenant_id, [tags], +1)
            corrected = self._get(cur, tenant_id, entry_id)
            self._unpost_tags(cur, tenant_id, entry_id)
            self._post_tags(cur, tenant_id, [corrected])
            return WriteOutcome(entry=corrected, applied=True)

    def retire_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        reason: str,
        context: WriteContext,
        superseded_by: UUID | None = None,
    ) -> WriteOutcome:
        """Take an active entry out of retrieval (retired, or superseded by another entry)."""
        with self._tenant_scope(tenant_id) as cur:
            if (done := self._already_applied(cur, tenant_id, context)) is not None:
                return done
            current = self._lock_active(cur, tenant_id, entry_id)
            if superseded_by is not None:
                self._get(cur, tenant_id, superseded_by)  # must exist in this tenant
                event_type, status = EventType.SUPERSEDED, EntryStatus.SUPERSEDED
            else:
                event_type, status = EventType.RETIRED, EntryStatus.RETIRED
            payload = {
                "reason": reason,
                "superseded_by": None if superseded_by is None else str(superseded_by),
            }
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, event_type, current.revision, payload, context
            )
            if recorded_at is None:  # a concurrent delivery of the same key won the race
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET status = %s, superseded_by = %s, updated_at = %s"
                " WHERE tenant_id = %s AND entry_id = %s",
                (status.value, superseded_by, recorded_at, tenant_id, entry_id),
            )
            self._count_tags(cur, tenant_id, [current.tags], -1)
            self._unpost_tags(cur, tenant_id, entry_id)
            return WriteOutcome(entry=self._get(cur, tenant_id, entry_id), applied=True)

    def _post_tags(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, entries: Sequence[MemoryEntry]
    ) -> None:
        """The entries' tags into the inverted index the lexical leg reads (one statement)."""
        rows = [
            (tag, entry.entry_id, len(tags), entry.service, entry.updated_at)
            for entry in entries
            for tags in [sorted(set(entry.tags))]
            for tag in tags
        ]
        if not rows:
            return
        tags, ids, counts, services, updated = (list(column) for column in zip(*rows, strict=True))
        cur.execute(
            "INSERT INTO org_memory_tag_postings"
            " (tenant_id, tag, entry_id, tag_count, service, updated_at)"
            " SELECT %s, p.* FROM unnest(%s::text[], %s::uuid[], %s::int[], %s::text[],"
            " %s::timestamptz[]) AS p",
            (tenant_id, tags, ids, counts, services, updated),
        )

    def _unpost_tags(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, entry_id: UUID
    ) -> None:
        cur.execute(
            "DELETE FROM org_memory_tag_postings WHERE tenant_id = %s AND entry_id = %s",
            (tenant_id, entry_id),
        )

    def _append_event(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
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
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, context: WriteContext
    ) -> WriteOutcome | None:
        """The outcome of an earlier write with this idempotency key, if there was one."""
        previous = self._entry_for_key(cur, tenant_id, context.idempotency_key)
        return None if previous is None else WriteOutcome(entry=previous, applied=False)

    def _raced(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, context: WriteContext
    ) -> WriteOutcome:
        done = self._already_applied(cur, tenant_id, context)
        assert done is not None
        return done

    def _entry_for_key(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, idempotency_key: str
    ) -> MemoryEntry | None:
        return self._entries_for_keys(cur, tenant_id, [idempotency_key]).get(idempotency_key)

    def _lock_active(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, entry_id: UUID
    ) -> MemoryEntry:
        cur.execute(
            _ENTRY_BY_ID_FOR_UPDATE,
            (tenant_id, entry_id),
        )
        row = cur.fetchone()
        if row is None:
            raise EntryNotFoundError(entry_id)
        entry = MemoryEntry.model_validate(row)
        if entry.status is not EntryStatus.ACTIVE:
            raise EntryNotActiveError(entry_id, entry.status.value)
        return entry

    def _register_tenant(self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str) -> None:
        cur.execute(
            "INSERT INTO org_memory_tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING",
            (tenant_id,),
        )
        cur.execute(
            "INSERT INTO org_memory_tenant_stats (tenant_id, active_entries, active_tag_total)"
            " VALUES (%s, 0, 0) ON CONFLICT (tenant_id) DO NOTHING",
            (tenant_id,),
        )

    def _count_tags(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        tag_sets: Sequence[Sequence[str]],
        delta: int,
    ) -> None:
        """Keep BM25 statistics current: tag document frequencies and the tenant's totals.

        `delta` is +1 when entries' tags enter the active set, -1 when they leave it; a
        correction is -1 for the old tags then +1 for the new. One statement per table
        whatever the number of entries; tags are locked in sorted order so concurrent
        writers cannot deadlock.
        """
        if not tag_sets:
            return
        counts = Counter(tag for tags in tag_sets for tag in set(tags))
        tags = sorted(counts)
        changes = [delta * counts[tag] for tag in tags]
        if delta > 0:
            cur.execute(
                "INSERT INTO org_memory_tag_stats (tenant_id, tag, doc_count)"
                " SELECT %s, tag, n FROM unnest(%s::text[], %s::int[]) AS s(tag, n) ORDER BY tag"
                " ON CONFLICT (tenant_id, tag)"
                " DO UPDATE SET doc_count = org_memory_tag_stats.doc_count + EXCLUDED.doc_count",
                (tenant_id, tags, changes),
            )
        else:
            cur.execute(
                "UPDATE org_memory_tag_stats t SET doc_count = t.doc_count + s.n"
                " FROM unnest(%s::text[], %s::int[]) AS s(tag, n)"
                " WHERE t.tenant_id = %s AND t.tag = s.tag",
                (tags, changes, tenant_id),
            )
        cur.execute(
            "UPDATE org_memory_tenant_stats SET active_entries = active_entries + %s,"
            " active_tag_total = active_tag_total + %s WHERE tenant_id = %s",
            (delta * len(tag_sets), delta * sum(len(set(tags)) for tags in tag_sets), tenant_id),
        )

    # -- reads -------------------------------------------------------------------------

    def get_entry(self, tenant_id: str, entry_id: UUID) -> MemoryEntry:
        with self._tenant_scope(tenant_id) as cur:
            return self._get(cur, tenant_id, entry_id)

    def _get(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, entry_id: UUID
    ) -> MemoryEntry:
        cur.execute(
            _ENTRY_BY_ID,
            (tenant_id, entry_id),
        )
        row = cur.fetchone()
        if row is None:
            raise EntryNotFoundError(entry_id)
        return MemoryEntry.model_validate(row)

    def search(
        self,
        tenant_id: str,
        *,
        topic_tags: Sequence[str],
        topic_vector: Sequence[float] | None,
        embed_rev: str,
        vector_cutoff: float,
        services: Sequence[str] | None,
        leg_limit: int,
    ) -> SearchLegs:
        """Both retrieval legs over one tenant's active entries, in one transaction.

        Lexical: BM25 over tag sets (rare shared tags weigh most), widest first.
        Vector: cosine distance against vectors of the current `embed_rev` and revision,
        only those closer than `vector_cutoff`, nearest first.
        """
        with self._tenant_scope(tenant_id, _VECTOR_LEG_SETTINGS) as cur:
            scope = None if services is None else list(services)
            corpus = self._corpus(cur, tenant_id, topic_tags)
            scored = self._lexical_leg(cur, tenant_id, corpus, scope, leg_limit)
            vector: list[VectorCandidate] = []
            if topic_vector is not None:
                vector = self._vector_leg(
                    cur, tenant_id, topic_vector, embed_rev, vector_cutoff, scope, leg_limit
                )
            ids = list(dict.fromkeys([i for i, _ in scored] + [c.entry_id for c in vector]))
            entries: dict[UUID, MemoryEntry] = {}
            if ids:
                cur.execute(_ENTRIES_BY_IDS, (tenant_id, ids))
                entries = {row["entry_id"]: MemoryEntry.model_validate(row) for row in cur}
            lexical = [
                LexicalCandidate(entry_id, score, corpus.shared_tags(entries[entry_id].tags))
                for entry_id, score in scored
                if entry_id in entries
            ]
            active, without_vector = self._coverage(cur, tenant_id, embed_rev, scope, corpus)
            return SearchLegs(
                lexical=lexical,
                vector=[c for c in vector if c.entry_id in entries],
                entries=entries,
                active_entries=active,
                active_without_current_vector=without_vector,
            )

    def _corpus(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str, topic_tags: Sequence[str]
    ) -> _Corpus:
        """The tenant's BM25 statistics and the topic's tag weights (idf), in one read."""
        tags = sorted(set(topic_tags))
        cur.execute(
            "SELECT t.active_entries, t.active_tag_total, s.tag, s.doc_count"
            " FROM org_memory_tenant_stats t LEFT JOIN org_memory_tag_stats s"
            "   ON s.tenant_id = t.tenant_id AND s.tag = ANY(%s) AND s.doc_count > 0"
            " WHERE t.tenant_id = %s",
            (tags, tenant_id),
        )
        rows = cur.fetchall()
        if not rows:
            return _Corpus(active_entries=0, avgdl=1.0, weights={})
        n = rows[0]["active_entries"]
        avgdl = max(rows[0]["active_tag_total"] / n, 1.0) if n else 1.0
        weights = {
            row["tag"]: math.log(1.0 + (n - row["doc_count"] + 0.5) / (row["doc_count"] + 0.5))
            for row in rows
            if row["tag"] is not None
        }
        return _Corpus(active_entries=n, avgdl=avgdl, weights=weights)

    def _lexical_leg(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        corpus: _Corpus,
        services: list[str] | None,
        limit: int,
    ) -> list[tuple[UUID, float]]:
        """BM25 from the inverted index: (entry, score), best first.

        Only the postings of the topic's tags are read (narrow rows, index-only), never
        the candidates' wide entry rows; scores are summed in one flat hash aggregate.
        """
        if not corpus.weights:
            return []
        tags = list(corpus.weights)
        cur.execute(
            # scores rounded to 1e-9: mathematically equal scores (equal weights summed
            # in another order) tie exactly, so recency then id decide, never float noise
            "SELECT p.entry_id,"
            "       round(sum(q.w) * (%(k1)s + 1.0) / (1.0 + %(k1)s * (1.0 - %(b)s + %(b)s"
            "         * max(p.tag_count) / %(avgdl)s)) * 1e9::float8) / 1e9::float8 AS score"
            " FROM unnest(%(tags)s::text[], %(weights)s::float8[]) AS q(tag, w)"
            " JOIN org_memory_tag_postings p ON p.tenant_id = %(tenant)s AND p.tag = q.tag"
            " WHERE (%(services)s::text[] IS NULL OR p.service = ANY(%(services)s))"
            " GROUP BY p.entry_id"
            " ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id"
            " LIMIT %(limit)s",
            {
                "tenant": tenant_id,
                "tags": tags,
                "weights": [corpus.weights[tag] for tag in tags],
                "avgdl": corpus.avgdl,
                "k1": BM25_K1,
                "b": BM25_B,
                "services": services,
                "limit": limit,
            },
        )
        return [(row["entry_id"], float(row["score"])) for row in cur]

    def _coverage(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        embed_rev: str,
        services: list[str] | None,
        corpus: _Corpus,
    ) -> tuple[int, int]:
        """Active entries in scope, and how many of them lack a vector of `embed_rev`.

        The whole tenant's active count is the maintained statistic; the entries lacking
        a current vector come from a partial index that holds only active entries keyed
        by `embed_rev`, so in the steady state (everything embedded) the scan is empty.
        """
        if services is None:
            cur.execute(
                "SELECT count(*) AS without_vector FROM org_memory_entries"
                " WHERE tenant_id = %(tenant)s AND status = 'active'"
                "   AND (embed_rev IS NULL OR embed_rev < %(rev)s OR embed_rev > %(rev)s)",
                {"tenant": tenant_id, "rev": embed_rev},
            )
            row = cur.fetchone()
            assert row is not None
            return corpus.active_entries, row["without_vector"]
        cur.execute(
            "SELECT count(*) AS active, count(*) FILTER (WHERE embed_rev IS DISTINCT FROM %s)"
            " AS without_vector FROM org_memory_entries"
            " WHERE tenant_id = %s AND status = 'active' AND service = ANY(%s)",
            (embed_rev, tenant_id, services),
        )
        row = cur.fetchone()
        assert row is not None
        return row["active"], row["without_vector"]

    def _vector_leg(
        self,
        cur: psycopg.Cursor[dict[str, Any]],
        tenant_id: str,
        topic_vector: Sequence[float],
        embed_rev: str,
        cutoff: float,
        services: list[str] | None,
        limit: int,
    ) -> list[VectorCandidate]:
        cur.execute(
            _VECTOR_LEG,
            {
                "q": Vector(list(topic_vector)),
                "tenant": tenant_id,
                "rev": embed_rev,
                "services": services,
                "cutoff": cutoff,
                "limit": limit,
            },
        )
        return [VectorCandidate(row["entry_id"], float(row["distance"])) for row in cur]

    # -- embeddings --------------------------------------------------------------------

    def entries_for_embedding(
        self, tenant_id: str, entry_ids: Sequence[UUID]
    ) -> list[EntryForEmbedding]:
        """Current text and revision of the given active entries."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT tenant_id, entry_id, revision, title, summary, service"
                " FROM org_memory_entries"
                " WHERE tenant_id = %s AND entry_id = ANY(%s) AND status = 'active'",
                (tenant_id, list(entry_ids)),
            )
            return [EntryForEmbedding(**row) for row in cur]

    def store_embeddings(
        self,
        tenant_id: str,
        embed_rev: str,
        items: Sequence[tuple[UUID, int, Sequence[float]]],
    ) -> int:
        """Store vectors, each only if its entry is still at the revision that was embedded.

        One statement for the batch; returns how many were stored (a stale job, or one
        already applied, stores nothing).
        """
        if not items:
            return 0
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "UPDATE org_memory_entries e SET embedding = v.embedding, embed_rev = %(rev)s,"
                " embedded_revision = v.revision, embedded_at = clock_timestamp()"
                # %b: vectors travel as 4-byte floats, not as 1,024 decimal strings
                " FROM unnest(%(ids)s::uuid[], %(revisions)s::int[], %(vectors)b::vector[])"
                "   AS v(entry_id, revision, embedding)"
                " WHERE e.tenant_id = %(tenant)s AND e.entry_id = v.entry_id"
                "   AND e.revision = v.revision"
                "   AND (e.embed_rev IS DISTINCT FROM %(rev)s"
                "        OR e.embedded_revision IS DISTINCT FROM v.revision)",
                {
                    "rev": embed_rev,
                    "ids": [entry_id for entry_id, _, _ in items],
                    "revisions": [revision for _, revision, _ in items],
                    "vectors": [Vector(v if isinstance(v, list) else list(v)) for _, _, v in items],
                    "tenant": tenant_id,
                },
            )
            return cur.rowcount

    def jobs_needing_embedding(
        self, tenant_id: str, embed_rev: str, *, after: UUID | None = None, limit: int = 500
    ) -> list[EmbedJob]:
        """Active entries with no vector or one of an old `embed_rev`/revision, by id (keyset)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT tenant_id, entry_id, revision FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = 'active'"
                "   AND (embed_rev IS DISTINCT FROM %s"
                "        OR embedded_revision IS DISTINCT FROM revision)"
                "   AND (%s::uuid IS NULL OR entry_id > %s)"
                " ORDER BY entry_id LIMIT %s",
                (tenant_id, embed_rev, after, after, limit),
            )
            return [EmbedJob(**row) for row in cur]

    def oldest_unembedded_at(self, tenant_id: str, embed_rev: str) -> Any:
        """When the longest-waiting active entry without a current vector was last written."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT min(updated_at) AS oldest FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = 'active'"
                "   AND (embed_rev IS DISTINCT FROM %s"
                "        OR embedded_revision IS DISTINCT FROM revision)",
                (tenant_id, embed_rev),
            )
            row = cur.fetchone()
            return None if row is None else row["oldest"]

    def tenant_ids(self) -> list[str]:
        """Every tenant that has written memory (ids only; content stays behind RLS)."""
        with self._conn.cursor() as cur:
            cur.execute("SELECT tenant_id FROM org_memory_tenants ORDER BY tenant_id")
            return [row[0] for row in cur]

    # -- request nonces ----------------------------------------------------------------

    def claim_nonce(self, tenant_id: str, key_id: str, nonce: str, retention_s: int) -> bool:
        """Record a signed request's nonce; False if this key already used it."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "DELETE FROM admin_request_nonces WHERE tenant_id = %s"
                " AND seen_at < clock_timestamp() - make_interval(secs => %s)",
                (tenant_id, retention_s),
            )
            cur.execute(
                "INSERT INTO admin_request_nonces (tenant_id, key_id, nonce) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id, key_id, nonce) DO NOTHING",
                (tenant_id, key_id, nonce),
            )
            return cur.rowcount == 1

    # -- projection rebuild ------------------------------------------------------------

    def _events(self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str) -> list[StoredEvent]:
        cur.execute(
            "SELECT entry_id, event_type, revision, payload, recorded_at FROM org_memory_events"
            " WHERE tenant_id = %s ORDER BY event_id",
            (tenant_id,),
        )
        return [
            StoredEvent(
                entry_id=row["entry_id"],
                event_type=EventType(row["event_type"]),
                revision=row["revision"],
                payload=row["payload"],
                recorded_at=row["recorded_at"],
            )
            for row in cur
        ]

    def _live(self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str) -> dict[UUID, Any]:
        cur.execute(
            "SELECT entry_id, title, summary, tags, service, origin, status, revision,"
            " incident_id, superseded_by, created_at, updated_at"
            " FROM org_memory_entries WHERE tenant_id = %s",
            (tenant_id,),
        )
        live = {}
        for row in cur:
            row["tags"] = tuple(row["tags"])
            row["origin"] = Origin(row["origin"])
            row["status"] = EntryStatus(row["status"])
            live[row["entry_id"]] = ProjectedEntry(**row)
        return live

    def _stats(
        self, cur: psycopg.Cursor[dict[str, Any]], tenant_id: str
    ) -> tuple[dict[str, int], tuple[int, int]]:
        cur.execute(
            "SELECT tag, doc_count FROM org_memory_tag_stats"
            " WHERE tenant_id = %s AND doc_count > 0",
            (tenant_id,),
        )
        tags = {row["tag"]: row["doc_count"] for row in cur}
        cur.execute(
            "SELECT active_entries, active_tag_total FROM org_memory_tenant_stats"
            " WHERE tenant_id = %s",
            (tenant_id,),
        )
        row = cur.fetchone()
        totals = (0, 0) if row is None else (row["active_entries"], row["active_tag_total"])
        return tags, totals

    @staticmethod
    def _expected_stats(
        state: dict[UUID, ProjectedEntry],
    ) -> tuple[dict[str, int], tuple[int, int]]:
        counts: dict[str, int] = {}
        active = 0
        total = 0
        for entry in state.values():
            if entry.status is EntryStatus.ACTIVE:
                active += 1
                unique = set(entry.tags)
                total += len(unique)
                for tag in unique:
                    counts[tag] = counts.get(tag, 0) + 1
        return counts, (active, total)

    def verify_projection(self, tenant_id: str) -> ProjectionReport:
        """Replay the events and compare with the live projection and tag statistics."""
        with self._tenant_scope(tenant_id) as cur:
            events = self._events(cur, tenant_id)
            expected = replay(events)
            live = self._live(cur, tenant_id)
            mismatches = [
                f"entry {entry_id}: live {live.get(entry_id)!r} != replayed {want!r}"
                for entry_id, want in expected.items()
                if live.get(entry_id) != want
            ]
            mismatches += [
                f"entry {entry_id}: in the projection but in no event"
                for entry_id in live.keys() - expected.keys()
            ]
            if self._stats(cur, tenant_id) != self._expected_stats(expected):
                mismatches.append("tag statistics differ from the replayed entries")
            cur.execute(
                "SELECT entry_id, array_agg(tag ORDER BY tag) AS tags"
                " FROM org_memory_tag_postings WHERE tenant_id = %s GROUP BY entry_id",
                (tenant_id,),
            )
            posted = {row["entry_id"]: tuple(row["tags"]) for row in cur}
            wanted = {
                e.entry_id: tuple(sorted(set(e.tags)))
                for e in expected.values()
                if e.status is EntryStatus.ACTIVE
            }
            if posted != wanted:
                mismatches.append("tag postings differ from the replayed active entries")
            return ProjectionReport(tenant_id, len(events), len(expected), mismatches)

    def rebuild_projection(self, tenant_id: str) -> ProjectionReport:
        """Replace the tenant's projection and statistics with a replay of its events.

        Vectors survive for entries whose revision is unchanged: they are derived from
        exactly that text.
        """
        with self._tenant_scope(tenant_id) as cur:
            events = self._events(cur, tenant_id)
            state = replay(events)
            cur.execute(
                "CREATE TEMP TABLE grandbo_kept_vectors ON COMMIT DROP AS"
                " SELECT entry_id, revision, embedding, embed_rev, embedded_revision, embedded_at"
                " FROM org_memory_entries WHERE tenant_id = %s AND embedding IS NOT NULL",
                (tenant_id,),
            )
            cur.execute("DELETE FROM org_memory_entries WHERE tenant_id = %s", (tenant_id,))
            cur.execute("DELETE FROM org_memory_tag_stats WHERE tenant_id = %s", (tenant_id,))
            cur.execute("DELETE FROM org_memory_tag_postings WHERE tenant_id = %s", (tenant_id,))
            cur.execute("DELETE FROM org_memory_tenant_stats WHERE tenant_id = %s", (tenant_id,))
            # COPY is refused under row-level security; executemany pipelines the inserts.
            cur.executemany(
                "INSERT INTO org_memory_entries (tenant_id, entry_id, title, summary, tags,"
                " service, origin, status, revision, incident_id, superseded_by, created_at,"
                " updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        tenant_id,
                        e.entry_id,
                        e.title,
                        e.summary,
                        list(e.tags),
                        e.service,
                        e.origin.value,
                        e.status.value,
                        e.revision,
                        e.incident_id,
                        e.superseded_by,
                        e.created_at,
                        e.updated_at,
                    )
                    for e in state.values()
                ],
            )
            cur.execute(
                "UPDATE org_memory_entries e SET embedding = k.embedding, embed_rev = k.embed_rev,"
                " embedded_revision = k.embedded_revision, embedded_at = k.embedded_at"
                " FROM grandbo_kept_vectors k"
                " WHERE e.tenant_id = %s AND e.entry_id = k.entry_id"
                "   AND e.revision = k.embedded_revision",
                (tenant_id,),
            )
            cur.execute(
                "INSERT INTO org_memory_tag_postings"
                " (tenant_id, tag, entry_id, tag_count, service, updated_at)"
                " SELECT e.tenant_id, t.tag, e.entry_id, cardinality(e.tags), e.service,"
                "        e.updated_at"
                " FROM org_memory_entries e CROSS JOIN LATERAL unnest(e.tags) AS t(tag)"
                " WHERE e.tenant_id = %s AND e.status = 'active'",
                (tenant_id,),
            )
            counts, (active, total) = self._expected_stats(state)
            cur.execute(
                "INSERT INTO org_memory_tag_stats (tenant_id, tag, doc_count)"
                " SELECT %s, tag, n FROM unnest(%s::text[], %s::int[]) AS s(tag, n)",
                (tenant_id, list(counts), list(counts.values())),
            )
            cur.execute(
                "INSERT INTO org_memory_tenant_stats (tenant_id, active_entries, active_tag_total)"
                " VALUES (%s, %s, %s)",
                (tenant_id, active, total),
            )
            return ProjectionReport(tenant_id, len(events), len(state), [])
