"""The two retrieval legs over one tenant's active entries: BM25 over tag sets from the
inverted tag index, and cosine distance against vectors of the current `embed_rev`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from pgvector import HalfVector
from psycopg import sql

from grandbo.memory.domain.models import (
    MemoryEntry,
)
from grandbo.memory.repository.entries import ENTRIES_BY_IDS, entry_columns
from grandbo.memory.repository.lexical import Corpus, LexicalLeg, scores
from grandbo.memory.repository.vector_indexes import HNSW_EF_SEARCH
from grandbo.memory.repository.vectors import stored
from grandbo.storage.tenant_scope import Cursor

# Set for the search's transaction. Tenants past the size threshold have an HNSW index
# (grandbo.memory.repository.vector_indexes); for them the iterative scan keeps the filters from
# under-returning, and ef_search sets recall (measured in docs/BENCHMARKS.md).
VECTOR_LEG_SETTINGS = {
    "hnsw.iterative_scan": "relaxed_order",
    "hnsw.ef_search": str(HNSW_EF_SEARCH),
}
# Cosine distance against vectors of the current embed_rev (a stored vector is always its
# entry's current revision's, by constraint: migration 0005). The cutoff applies after
# the nearest `limit` are found, so an index scan stops at `limit` instead of walking
# the graph for rows that will never pass the cutoff. With `now`, episodic entries expired
# by then (the sweeper not past yet) are filtered out here, so they never take a slot.
# The limit stays a constant: computed (an expression with a subquery), the planner
# assumes a tenth of the rows and prefers an exact scan to the tenant's HNSW index. Ties
# at the limit go by id (grandbo_search does the same, migration 0025): any plan keeps the
# same entries; with the HNSW index the planner adds an incremental sort to its scan.
_VECTOR_LEG = (
    "SELECT entry_id, distance FROM ("
    "   SELECT entry_id, embedding <=> %(q)b AS distance FROM org_memory_entries"
    "   WHERE tenant_id = %(tenant)s AND status = 'active' AND embed_rev = %(rev)s"
    "     AND (%(services)s::text[] IS NULL OR service = ANY(%(services)s))"
    "     AND (%(now)s::timestamptz IS NULL OR expires_at IS NULL OR expires_at > %(now)s)"
    "   ORDER BY embedding <=> %(q)b, entry_id LIMIT %(limit)s"
    " ) nearest WHERE distance < %(cutoff)s ORDER BY distance, entry_id"
)


# The candidates' entries and, for those the vector leg did not list, their distance.
_ENTRIES_WITH_DISTANCE = sql.SQL(
    "SELECT {columns}, CASE WHEN status = 'active' AND embed_rev = %(rev)s"
    "   THEN embedding <=> %(q)b END AS distance"
    " FROM org_memory_entries WHERE tenant_id = %(tenant)s AND entry_id = ANY(%(ids)s)"
).format(columns=entry_columns())


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
class Probe:
    """One entry's signals for the topic, whether or not either leg listed it: what "why
    not this one?" reads (`grandbo.memory.read.explanation`). `entry` is None when the entry
    is not the tenant's; `bm25` None when it shares no tag with the topic (or is out of
    the scope); `distance` None without a current vector or a topic vector."""

    entry: MemoryEntry | None
    bm25: float | None
    distance: float | None
    shared_tags: list[str]


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
    # the entries asked about (`search(probe=...)`), each with its own signals
    probes: dict[UUID, Probe] = field(default_factory=dict)
    # the BM25 weight (idf) of each of the topic's tags the tenant's active entries carry:
    # what the best score the topic itself could reach is measured from (`confidence`)
    tag_weights: dict[str, float] = field(default_factory=dict)


class EntrySearch(LexicalLeg):
    """Both legs in one transaction, with the tenant's vector coverage, as six statements
    (`search_statements`): what `grandbo_search` does in one call (`SearchFunction`), and
    the reference it is compared with."""

    def search_statements(
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
        probe: Sequence[UUID] = (),
    ) -> SearchLegs:
        """Both retrieval legs over one tenant's active entries, in one transaction.

        Lexical: BM25 over tag sets (rare shared tags weigh most), widest first.
        Vector: cosine distance against vectors of the current `embed_rev` and revision,
        only those closer than `vector_cutoff`, nearest first.
        With `now`, episodic entries expired by then (the sweeper not past yet) are left
        out of both legs, so they never take a slot: the vector leg filters them, the
        lexical leg reads that many more rows.

        Three round trips, pipelined: the corpus, the vector leg and the coverage; the
        lexical leg (it needs the corpus's weights and expired count); the entries (with
        the distance of those the vector leg did not list) and the BM25 of those the
        lexical leg did not.

        With `probe`, the same statements also read those entries and both their signals
        (`SearchLegs.probes`); the legs are the same as without it.
        """
        scope = None if services is None else list(services)
        # scaled and rounded once, for the vector leg and the lexical-only candidates
        topic = None if topic_vector is None else stored(topic_vector)
        with self._tenant_scope(tenant_id, VECTOR_LEG_SETTINGS, pipelined=True):
            corpus_sent = self._send_corpus(tenant_id, topic_tags, now)
            vector_sent = (
                None
                if topic is None
                else self._send_vector_leg(
                    tenant_id, topic, embed_rev, vector_cutoff, scope, leg_limit, now
                )
            )
            coverage_sent = self._send_coverage(tenant_id, embed_rev, scope)
            corpus = Corpus.read(corpus_sent)
            scored = scores(self._send_bm25(tenant_id, corpus, scope, leg_limit + corpus.expired))
            vector = [] if vector_sent is None else _vector_candidates(vector_sent)
            bm25 = dict(scored)
            distances = {c.entry_id: c.distance for c in vector}
            ids = list(dict.fromkeys([*bm25, *distances]))
            fetched = list(dict.fromkeys([*ids, *probe]))
            # the other leg's signal for each candidate only one leg found (and each probe)
            unscored = [i for i in dict.fromkeys([*distances, *probe]) if i not in bm25]
            entries_sent = (
                self._send_entries(tenant_id, fetched, topic, embed_rev) if fetched else None
            )
            bm25_sent = (
                self._send_bm25(tenant_id, corpus, scope, len(unscored), only=unscored)
                if unscored
                else None
            )
            entries: dict[UUID, MemoryEntry] = {}
            for row in [] if entries_sent is None else entries_sent:
                distance = row.pop("distance", None)
                if distance is not None and row["entry_id"] not in distances:
                    distances[row["entry_id"]] = float(distance)
                entries[row["entry_id"]] = MemoryEntry.model_validate(row)
            bm25.update(scores(bm25_sent))
            active, without_vector = _coverage(coverage_sent, corpus)
        probes = {
            entry_id: Probe(
                entries.get(entry_id),
                bm25.get(entry_id),
                distances.get(entry_id),
                corpus.shared_tags(entries[entry_id].index_tags)
                if entry_id in bm25 and entry_id in entries
                else [],
            )
            for entry_id in probe
        }
        entries = {entry_id: entries[entry_id] for entry_id in ids if entry_id in entries}
        if corpus.expired:
            entries = {
                entry_id: entry
                for entry_id, entry in entries.items()
                if entry.expires_at is None or (now is not None and entry.expires_at > now)
            }
        lexical = [
            LexicalCandidate(entry_id, score, corpus.shared_tags(entries[entry_id].index_tags))
            for entry_id, score in scored
            if entry_id in entries
        ][:leg_limit]
        vector = [c for c in vector if c.entry_id in entries][:leg_limit]
        candidates = {c.entry_id for c in lexical} | {c.entry_id for c in vector}
        lexical_scores = {i: bm25[i] for i in ids if i in candidates and i in bm25}
        shared = {c.entry_id: c.shared_tags for c in lexical} | {
            entry_id: corpus.shared_tags(entries[entry_id].index_tags)
            for entry_id in lexical_scores.keys() - {c.entry_id for c in lexical}
        }
        return SearchLegs(
            lexical=lexical,
            vector=vector,
            entries=entries,
            active_entries=active,
            active_without_current_vector=without_vector,
            lexical_scores=lexical_scores,
            distances={i: distances[i] for i in ids if i in candidates and i in distances},
            shared_tags=shared,
            probes=probes,
            tag_weights=corpus.weights,
        )

    def _send_entries(
        self, tenant_id: str, entry_ids: list[UUID], topic: HalfVector | None, embed_rev: str
    ) -> Cursor:
        """These entries, each with its current vector's cosine distance to the topic (NULL
        without one, or without a topic): one statement, looked up by primary key."""
        if topic is None:
            return self._sent(ENTRIES_BY_IDS, (tenant_id, entry_ids))
        return self._sent(
            _ENTRIES_WITH_DISTANCE,
            {"tenant": tenant_id, "ids": entry_ids, "q": topic, "rev": embed_rev},
        )

    def _send_coverage(self, tenant_id: str, embed_rev: str, services: list[str] | None) -> Cursor:
        """Active entries in scope, and how many of them lack a vector of `embed_rev`
        (`_coverage`).

        The whole tenant's active count is the maintained statistic (the corpus); the
        entries lacking a current vector come from a partial index that holds only active
        entries keyed by `embed_rev`, so in the steady state (everything embedded) the
        scan is empty.
        """
        if services is None:
            return self._sent(
                "SELECT NULL AS active, count(*) AS without_vector FROM org_memory_entries"
                " WHERE tenant_id = %(tenant)s AND status = 'active'"
                "   AND (embed_rev IS NULL OR embed_rev < %(rev)s OR embed_rev > %(rev)s)",
                {"tenant": tenant_id, "rev": embed_rev},
            )
        return self._sent(
            "SELECT count(*) AS active, count(*) FILTER (WHERE embed_rev IS DISTINCT FROM %s)"
            " AS without_vector FROM org_memory_entries"
            " WHERE tenant_id = %s AND status = 'active' AND service = ANY(%s)",
            (embed_rev, tenant_id, services),
        )

    def _send_vector_leg(
        self,
        tenant_id: str,
        topic: HalfVector,
        embed_rev: str,
        cutoff: float,
        services: list[str] | None,
        limit: int,
        now: datetime | None,
    ) -> Cursor:
        return self._sent(
            _VECTOR_LEG,
            {
                "q": topic,
                "tenant": tenant_id,
                "rev": embed_rev,
                "services": services,
                "cutoff": cutoff,
                "limit": limit,
                "now": now,
            },
        )


def _vector_candidates(sent: Cursor) -> list[VectorCandidate]:
    return [VectorCandidate(row["entry_id"], float(row["distance"])) for row in sent]


def _coverage(sent: Cursor, corpus: Corpus) -> tuple[int, int]:
    row = sent.fetchone()
    assert row is not None
    active = corpus.active_entries if row["active"] is None else row["active"]
    return active, row["without_vector"]
