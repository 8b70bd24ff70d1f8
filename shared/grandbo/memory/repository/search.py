"""The two retrieval legs over one tenant's active entries: BM25 over tag sets from the
inverted tag index, and cosine distance against vectors of the current `embed_rev`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from pgvector import Vector
from psycopg import sql

from grandbo.memory.models import (
    MemoryEntry,
)
from grandbo.memory.repository.entries import COUNT_EXPIRED, ENTRIES_BY_IDS, EntryReads
from grandbo.memory.repository.postings import TITLE_TAG_TF
from grandbo.memory.vector_index import HNSW_EF_SEARCH
from grandbo.storage.tenant_scope import Cursor

# BM25 over tag sets: tf is 1 (a tag is present or not), the document length is the
# entry's tag count. Standard Okapi constants.
BM25_K1 = 1.2
BM25_B = 0.75

# Set for the search's transaction. Tenants past the size threshold have an HNSW index
# (grandbo.memory.vector_index); for them the iterative scan keeps the filters from
# under-returning, and ef_search sets recall (measured in docs/BENCHMARKS.md).
VECTOR_LEG_SETTINGS = {
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
    expired: int  # episodic entries past their expiry the sweeper has not retired yet

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
    # every candidate of either leg scored on both (fusion): its BM25 (absent: shares no
    # tag with the topic) and its cosine distance (absent: no current vector, or no topic
    # vector)
    lexical_scores: dict[UUID, float] = field(default_factory=dict)
    distances: dict[UUID, float] = field(default_factory=dict)


class EntrySearch(EntryReads):
    """Both legs in one transaction, with the tenant's vector coverage."""

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
        now: datetime | None = None,
    ) -> SearchLegs:
        """Both retrieval legs over one tenant's active entries, in one transaction.

        Lexical: BM25 over tag sets (rare shared tags weigh most), widest first.
        Vector: cosine distance against vectors of the current `embed_rev` and revision,
        only those closer than `vector_cutoff`, nearest first.
        With `now`, episodic entries expired by then (the sweeper not past yet) are left
        out of both legs: each leg reads that many more rows, so they never take a slot.
        """
        with self._tenant_scope(tenant_id, VECTOR_LEG_SETTINGS) as cur:
            scope = None if services is None else list(services)
            corpus = self._corpus(cur, tenant_id, topic_tags, now)
            expired = corpus.expired
            fetch = leg_limit + expired
            scored = self._lexical_leg(cur, tenant_id, corpus, scope, fetch)
            vector: list[VectorCandidate] = []
            if topic_vector is not None:
                vector = self._vector_leg(
                    cur, tenant_id, topic_vector, embed_rev, vector_cutoff, scope, fetch
                )
            ids = list(dict.fromkeys([i for i, _ in scored] + [c.entry_id for c in vector]))
            entries: dict[UUID, MemoryEntry] = {}
            if ids:
                cur.execute(ENTRIES_BY_IDS, (tenant_id, ids))
                entries = {row["entry_id"]: MemoryEntry.model_validate(row) for row in cur}
            if expired:
                entries = {
                    entry_id: entry
                    for entry_id, entry in entries.items()
                    if entry.expires_at is None or (now is not None and entry.expires_at > now)
                }
            lexical = [
                LexicalCandidate(entry_id, score, corpus.shared_tags(entries[entry_id].tags))
                for entry_id, score in scored
                if entry_id in entries
            ][:leg_limit]
            vector = [c for c in vector if c.entry_id in entries][:leg_limit]
            lexical_scores = {c.entry_id: c.score for c in lexical}
            distances = {c.entry_id: c.distance for c in vector}
            # the other leg's signal for each candidate only one leg found
            if unscored := [c.entry_id for c in vector if c.entry_id not in lexical_scores]:
                lexical_scores.update(
                    self._lexical_leg(cur, tenant_id, corpus, scope, len(unscored), unscored)
                )
            unmeasured = [c.entry_id for c in lexical if c.entry_id not in distances]
            if topic_vector is not None and unmeasured:
                distances.update(
                    self._distances(cur, tenant_id, topic_vector, embed_rev, unmeasured)
                )
            active, without_vector = self._coverage(cur, tenant_id, embed_rev, scope, corpus)
            return SearchLegs(
                lexical=lexical,
                vector=vector,
                entries=entries,
                active_entries=active,
                active_without_current_vector=without_vector,
                lexical_scores=lexical_scores,
                distances=distances,
            )

    def _corpus(
        self, cur: Cursor, tenant_id: str, topic_tags: Sequence[str], now: datetime | None
    ) -> _Corpus:
        """The tenant's BM25 statistics, the topic's tag weights (idf) and, with `now`, how
        many episodic entries have expired unswept, in one read."""
        tags = sorted(set(topic_tags))
        cur.execute(
            sql.SQL(
                "SELECT t.active_entries, t.active_tag_total, s.tag, s.doc_count,"
                " ({expired}) AS expired"
                " FROM org_memory_tenant_stats t LEFT JOIN org_memory_tag_stats s"
                "   ON s.tenant_id = t.tenant_id AND s.tag = ANY(%s) AND s.doc_count > 0"
                " WHERE t.tenant_id = %s"
            ).format(expired=sql.SQL(COUNT_EXPIRED)),
            (tenant_id, now, tags, tenant_id),
        )
        rows = cur.fetchall()
        if not rows:
            return _Corpus(active_entries=0, avgdl=1.0, weights={}, expired=0)
        n = rows[0]["active_entries"]
        avgdl = max(rows[0]["active_tag_total"] / n, 1.0) if n else 1.0
        weights = {
            row["tag"]: math.log(1.0 + (n - row["doc_count"] + 0.5) / (row["doc_count"] + 0.5))
            for row in rows
            if row["tag"] is not None
        }
        return _Corpus(active_entries=n, avgdl=avgdl, weights=weights, expired=rows[0]["expired"])

    def _lexical_leg(
        self,
        cur: Cursor,
        tenant_id: str,
        corpus: _Corpus,
        services: list[str] | None,
        limit: int,
        only: list[UUID] | None = None,
    ) -> list[tuple[UUID, float]]:
        """BM25 from the inverted index: (entry, score), best first. A tag the entry's
        title carries counts TITLE_TAG_TF times (field weighting, saturated by k1).
        With `only`, just those entries are scored (those sharing no tag are left out).

        Only the postings of the topic's tags are read (narrow rows, index-only), never
        the candidates' wide entry rows; scores are summed in one flat hash aggregate.
        """
        if not corpus.weights:
            return []
        tags = list(corpus.weights)
        # With `only`, the postings are looked up by their full key (tenant, tag, entry),
        # never scanned per tag: a condition the index can use, not an OR-ed filter.
        only_these = sql.SQL(" AND p.entry_id = ANY(%(only)s)" if only is not None else "")
        cur.execute(
            # scores rounded to 1e-9: mathematically equal scores (equal weights summed
            # in another order) tie exactly, so recency then id decide, never float noise
            # BM25 with tf = TITLE_TAG_TF for a tag the title carries, else 1 (NULL: a
            # posting from before migration 0014 the backfill has not reached)
            sql.SQL(
                "SELECT p.entry_id, round(sum(q.w * t.tf * (%(k1)s + 1.0) / (t.tf + %(k1)s"
                "         * (1.0 - %(b)s + %(b)s * p.tag_count / %(avgdl)s))) * 1e9::float8)"
                "       / 1e9::float8 AS score"
                " FROM unnest(%(tags)s::text[], %(weights)s::float8[]) AS q(tag, w)"
                " JOIN org_memory_tag_postings p"
                "   ON p.tenant_id = %(tenant)s AND p.tag = q.tag{only}"
                " CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN %(title_tf)s::float8"
                "   ELSE 1.0::float8 END AS tf) t"
                " WHERE (%(services)s::text[] IS NULL OR p.service = ANY(%(services)s))"
                " GROUP BY p.entry_id"
                " ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id"
                " LIMIT %(limit)s"
            ).format(only=only_these),
            {
                "tenant": tenant_id,
                "tags": tags,
                "weights": [corpus.weights[tag] for tag in tags],
                "avgdl": corpus.avgdl,
                "k1": BM25_K1,
                "title_tf": TITLE_TAG_TF,
                "b": BM25_B,
                "services": services,
                "limit": limit,
                "only": only,
            },
        )
        return [(row["entry_id"], float(row["score"])) for row in cur]

    def _distances(
        self,
        cur: Cursor,
        tenant_id: str,
        topic_vector: Sequence[float],
        embed_rev: str,
        entry_ids: list[UUID],
    ) -> dict[UUID, float]:
        """Cosine distance of these entries' current vectors to the topic (by primary key)."""
        cur.execute(
            "SELECT entry_id, embedding <=> %(q)b AS distance FROM org_memory_entries"
            " WHERE tenant_id = %(tenant)s AND entry_id = ANY(%(ids)s)"
            "   AND status = 'active' AND embed_rev = %(rev)s",
            {
                "q": Vector(list(topic_vector)),
                "tenant": tenant_id,
                "ids": entry_ids,
                "rev": embed_rev,
            },
        )
        return {row["entry_id"]: float(row["distance"]) for row in cur}

    def _coverage(
        self,
        cur: Cursor,
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
        cur: Cursor,
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
