"""The two retrieval legs over one tenant's active entries: BM25 over tag sets from the
inverted tag index, and cosine distance against vectors of the current `embed_rev`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from pgvector import HalfVector

from grandbo.memory.models import (
    MemoryEntry,
)
from grandbo.memory.repository.entries import ENTRIES_BY_IDS
from grandbo.memory.repository.lexical import Corpus, LexicalLeg
from grandbo.memory.repository.vectors import stored
from grandbo.memory.vector_index import HNSW_EF_SEARCH
from grandbo.storage.tenant_scope import Cursor

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
    # the topic's tags each candidate with a BM25 score carries, rarest first
    shared_tags: dict[UUID, list[str]] = field(default_factory=dict)


class EntrySearch(LexicalLeg):
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
            scored = self._bm25(cur, tenant_id, corpus, scope, fetch)
            # scaled and rounded once, for the vector leg and the lexical-only candidates
            topic = None if topic_vector is None else stored(topic_vector)
            vector: list[VectorCandidate] = []
            if topic is not None:
                vector = self._vector_leg(
                    cur, tenant_id, topic, embed_rev, vector_cutoff, scope, fetch
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
                    self._bm25(cur, tenant_id, corpus, scope, len(unscored), only=unscored)
                )
            unmeasured = [c.entry_id for c in lexical if c.entry_id not in distances]
            if topic is not None and unmeasured:
                distances.update(self._distances(cur, tenant_id, topic, embed_rev, unmeasured))
            active, without_vector = self._coverage(cur, tenant_id, embed_rev, scope, corpus)
            shared = {c.entry_id: c.shared_tags for c in lexical} | {
                entry_id: corpus.shared_tags(entries[entry_id].tags)
                for entry_id in lexical_scores.keys() - {c.entry_id for c in lexical}
            }
            return SearchLegs(
                lexical=lexical,
                vector=vector,
                entries=entries,
                active_entries=active,
                active_without_current_vector=without_vector,
                lexical_scores=lexical_scores,
                distances=distances,
                shared_tags=shared,
            )

    def _distances(
        self,
        cur: Cursor,
        tenant_id: str,
        topic: HalfVector,
        embed_rev: str,
        entry_ids: list[UUID],
    ) -> dict[UUID, float]:
        """Cosine distance of these entries' current vectors to the topic (by primary key)."""
        cur.execute(
            "SELECT entry_id, embedding <=> %(q)b AS distance FROM org_memory_entries"
            " WHERE tenant_id = %(tenant)s AND entry_id = ANY(%(ids)s)"
            "   AND status = 'active' AND embed_rev = %(rev)s",
            {
                "q": topic,
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
        corpus: Corpus,
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
        topic: HalfVector,
        embed_rev: str,
        cutoff: float,
        services: list[str] | None,
        limit: int,
    ) -> list[VectorCandidate]:
        cur.execute(
            _VECTOR_LEG,
            {
                "q": topic,
                "tenant": tenant_id,
                "rev": embed_rev,
                "services": services,
                "cutoff": cutoff,
                "limit": limit,
            },
        )
        return [VectorCandidate(row["entry_id"], float(row["distance"])) for row in cur]
