"""The lexical leg: BM25 over tag sets from the inverted tag index, exact: every posting
of the topic's tags is summed (a title tag counting TITLE_TAG_TF times). A leg read to a
depth per tag for large organizations was measured and not adopted (its top 25 agreed
with this one's on 54 % at 50,000 entries: docs/BENCHMARKS.md,
`bench/experiments/lexical_scale.py`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg import sql

from grandbo.memory.repository.entries import COUNT_EXPIRED, EntryReads
from grandbo.memory.repository.postings import TITLE_TAG_TF
from grandbo.storage.tenant_scope import Cursor

# BM25 over tag sets: tf is 1 (a tag is present or not), the document length is the
# entry's tag count. Standard Okapi constants.
BM25_K1 = 1.2
BM25_B = 0.75

# BM25 of the topic's tags, summed per entry: tf = TITLE_TAG_TF for a tag the title
# carries, else 1 (NULL: a posting from before migration 0014 the backfill has not
# reached). {postings} is where the postings come from.
_BM25 = (
    "SELECT p.entry_id, round(sum(q.w * t.tf * (%(k1)s + 1.0) / (t.tf + %(k1)s"
    "         * (1.0 - %(b)s + %(b)s * p.tag_count / %(avgdl)s))) * 1e9::float8)"
    "       / 1e9::float8 AS score"
    " FROM unnest(%(tags)s::text[], %(weights)s::float8[]) AS q(tag, w)"
    " {postings}"
    " CROSS JOIN LATERAL (SELECT CASE WHEN p.in_title THEN %(title_tf)s::float8"
    "   ELSE 1.0::float8 END AS tf) t"
    " {where} GROUP BY p.entry_id"
)
# Every posting of each tag (the leg), or those of the given entries only, a condition on
# the postings' key the index uses (4 ms for 25 entries at 5,000; a join to the unnested
# ids planned a scan of each tag's list instead: 11 ms)
_ALL_POSTINGS = "JOIN org_memory_tag_postings p ON p.tenant_id = %(tenant)s AND p.tag = q.tag"
_THESE_POSTINGS = _ALL_POSTINGS + " AND p.entry_id = ANY(%(only)s)"
_IN_SCOPE = "WHERE (%(services)s::text[] IS NULL OR p.service = ANY(%(services)s))"


def scores(sent: Cursor | None) -> list[tuple[UUID, float]]:
    """The entries and scores `LexicalLeg._send_bm25` asked for, best first."""
    return [] if sent is None else [(row["entry_id"], float(row["score"])) for row in sent]


@dataclass(frozen=True, slots=True)
class Corpus:
    """A tenant's BM25 statistics and the idf of the topic's tags it holds."""

    active_entries: int
    avgdl: float
    weights: dict[str, float]
    expired: int  # episodic entries past their expiry the sweeper has not retired yet

    @classmethod
    def read(cls, cur: Cursor) -> Corpus:
        """The corpus `LexicalLeg._send_corpus` asked for."""
        rows = cur.fetchall()
        if not rows:
            return cls(active_entries=0, avgdl=1.0, weights={}, expired=0)
        n = rows[0]["active_entries"]
        avgdl = max(rows[0]["active_tag_total"] / n, 1.0) if n else 1.0
        weights = {
            row["tag"]: math.log(1.0 + (n - row["doc_count"] + 0.5) / (row["doc_count"] + 0.5))
            for row in rows
            if row["tag"] is not None
        }
        return cls(active_entries=n, avgdl=avgdl, weights=weights, expired=rows[0]["expired"])

    def shared_tags(self, entry_tags: Sequence[str]) -> list[str]:
        """The topic's tags this entry carries, rarest (heaviest) first."""
        shared = {tag for tag in entry_tags if tag in self.weights}
        return sorted(shared, key=lambda tag: (-self.weights[tag], tag))


class LexicalLeg(EntryReads):
    """BM25 over tag sets from the postings of the topic's tags."""

    def _send_corpus(
        self, tenant_id: str, topic_tags: Sequence[str], now: datetime | None
    ) -> Cursor:
        """The tenant's BM25 statistics, the topic's tags' document counts and, with `now`,
        how many episodic entries have expired unswept, in one read (`Corpus.read`)."""
        tags = sorted(set(topic_tags))
        return self._sent(
            sql.SQL(
                "SELECT t.active_entries, t.active_tag_total, s.tag, s.doc_count,"
                " ({expired}) AS expired"
                " FROM org_memory_tenant_stats t LEFT JOIN org_memory_tag_stats s"
                "   ON s.tenant_id = t.tenant_id AND s.tag = ANY(%s) AND s.doc_count > 0"
                " WHERE t.tenant_id = %s"
            ).format(expired=sql.SQL(COUNT_EXPIRED)),
            (tenant_id, now, tags, tenant_id),
        )

    def _send_bm25(
        self,
        tenant_id: str,
        corpus: Corpus,
        services: list[str] | None,
        limit: int,
        only: list[UUID] | None = None,
    ) -> Cursor | None:
        """Exact BM25 from every posting of the topic's tags (with `only`, of those entries
        alone, looked up by the postings' key): best first, `limit` of them (`scores`).
        None: the topic shares no tag with the tenant's entries.

        Scores are summed in one flat hash aggregate and rounded to 1e-9: mathematically
        equal scores (equal weights summed in another order) tie exactly, so recency then
        id decide, never float noise.
        """
        if not corpus.weights:
            return None
        return self._sent(
            sql.SQL(
                _BM25 + " ORDER BY score DESC, max(p.updated_at) DESC, p.entry_id LIMIT %(limit)s"
            ).format(
                postings=sql.SQL(_ALL_POSTINGS if only is None else _THESE_POSTINGS),
                where=sql.SQL(_IN_SCOPE),
            ),
            self._parameters(tenant_id, corpus, services) | {"limit": limit, "only": only},
        )

    @staticmethod
    def _parameters(
        tenant_id: str, corpus: Corpus, services: list[str] | None
    ) -> dict[str, object]:
        tags = list(corpus.weights)
        return {
            "tenant": tenant_id,
            "tags": tags,
            "weights": [corpus.weights[tag] for tag in tags],
            "avgdl": corpus.avgdl,
            "k1": BM25_K1,
            "b": BM25_B,
            "title_tf": TITLE_TAG_TF,
            "services": services,
        }
