"""The search in one call: `grandbo_search` (migration 0022) runs both legs, the corpus,
the coverage, the candidates' entries and their other leg's signal inside the server, in
one statement whose inner plans PL/pgSQL keeps per backend (a pooling proxy reuses them
across clients; a client's statements are planned again on every call).

`EntrySearch.search_statements` is the same search as the six statements it replaced: the
reference the same-answers test and `bench/search_round_trip.py` compare this one with.

Behind RDS Proxy: a client is pinned to its backend by session state it leaves (a SET, a
prepared statement, a temporary table, a session lock:
https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy-pinning.html);
this statement leaves none (its settings are `set_config(..., true)`, transaction-local,
inside the function, and prepared statements are off), which the transaction-pooler tests
check on PgBouncer's shared backend (tests/integration/test_transaction_pooler.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from grandbo.memory.domain.models import MemoryEntry
from grandbo.memory.repository.entries import COLUMN_OF, ENTRY_COLUMNS
from grandbo.memory.repository.lexical import BM25_B, BM25_K1, Corpus
from grandbo.memory.repository.postings import TITLE_TAG_TF
from grandbo.memory.repository.search import (
    VECTOR_LEG_SETTINGS,
    EntrySearch,
    LexicalCandidate,
    Probe,
    SearchLegs,
    VectorCandidate,
)
from grandbo.memory.repository.vectors import stored

_CALL = (
    "SELECT * FROM grandbo_search(%(tenant)s, %(tags)s::text[], %(q)s, %(rev)s,"
    " %(cutoff)s::float8, %(services)s::text[], %(limit)s::integer, %(now)s::timestamptz,"
    " %(probe)s::uuid[], %(k1)s::float8, %(b)s::float8, %(title_tf)s::float8,"
    " %(iterative_scan)s, %(ef_search)s)"
)


class SearchFunction(EntrySearch):
    """`search` as one call of the server's function; `search_statements` as before."""

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
        probe: Sequence[UUID] = (),
    ) -> SearchLegs:
        """Both retrieval legs over one tenant's active entries (EntrySearch.search_statements
        says what each does), computed by `grandbo_search` in one round trip."""
        params = {
            "tenant": tenant_id,
            "tags": sorted(set(topic_tags)),
            "q": None if topic_vector is None else stored(topic_vector),
            "rev": embed_rev,
            "cutoff": vector_cutoff,
            "services": None if services is None else list(services),
            "limit": leg_limit,
            "now": now,
            "probe": list(dict.fromkeys(probe)),
            "k1": BM25_K1,
            "b": BM25_B,
            "title_tf": TITLE_TAG_TF,
            "iterative_scan": VECTOR_LEG_SETTINGS["hnsw.iterative_scan"],
            "ef_search": VECTOR_LEG_SETTINGS["hnsw.ef_search"],
        }
        # one statement, one round trip: the function scopes its own transaction
        try:
            rows = self._tenant_statement(tenant_id, _CALL, params)
        except psycopg.errors.UndefinedFunction:
            # a schema before migration 0022 (code deployed ahead of its migration, a lake
            # migrated part way): the six statements answer the same
            return self.search_statements(
                tenant_id,
                topic_tags=topic_tags,
                topic_vector=topic_vector,
                embed_rev=embed_rev,
                vector_cutoff=vector_cutoff,
                services=services,
                leg_limit=leg_limit,
                now=now,
                probe=probe,
            )
        return _legs(rows, probe)


def _legs(rows: list[dict[str, Any]], probe: Sequence[UUID]) -> SearchLegs:
    """The function's rows as the statements' SearchLegs."""
    head = rows[0]
    tags, weights = head["corpus_tags"], head["corpus_weights"]
    corpus = Corpus(
        active_entries=head["active_entries"],
        avgdl=head["avgdl"],
        weights={} if tags is None else dict(zip(tags, weights, strict=True)),
        expired=head["expired"],
    )
    found = rows[1:]
    entries = {
        row["entry_id"]: MemoryEntry.model_validate(
            # a function from before migration 0041 returns no given_tags: the stems show
            {f: row.get(COLUMN_OF.get(f, f)) for f in ENTRY_COLUMNS}
        )
        for row in found
    }
    lexical = sorted((r for r in found if r["lexical_rank"] is not None), key=_rank("lexical"))
    vector = sorted((r for r in found if r["vector_rank"] is not None), key=_rank("vector"))
    candidates = [row for row in found if row["candidate"]]
    scored = {
        r["entry_id"]: r["lexical_score"] for r in candidates if r["lexical_score"] is not None
    }
    return SearchLegs(
        lexical=[
            LexicalCandidate(
                r["entry_id"],
                r["lexical_score"],
                corpus.shared_tags(entries[r["entry_id"]].index_tags),
            )
            for r in lexical
        ],
        vector=[VectorCandidate(r["entry_id"], r["distance"]) for r in vector],
        entries={r["entry_id"]: entries[r["entry_id"]] for r in candidates},
        active_entries=corpus.active_entries if head["active"] is None else head["active"],
        active_without_current_vector=head["without_vector"],
        lexical_scores=scored,
        distances={r["entry_id"]: r["distance"] for r in candidates if r["distance"] is not None},
        shared_tags={
            entry_id: corpus.shared_tags(entries[entry_id].index_tags) for entry_id in scored
        },
        probes={
            entry_id: _probe(entry_id, {r["entry_id"]: r for r in found}, entries, corpus)
            for entry_id in probe
        },
        tag_weights=corpus.weights,
    )


def _rank(leg: str) -> Any:
    return lambda row: row[f"{leg}_rank"]


def _probe(
    entry_id: UUID,
    rows: dict[UUID, dict[str, Any]],
    entries: dict[UUID, MemoryEntry],
    corpus: Corpus,
) -> Probe:
    row = rows.get(entry_id)
    if row is None:  # not the tenant's
        return Probe(None, None, None, [])
    bm25 = row["lexical_score"]
    return Probe(
        entries[entry_id],
        bm25,
        row["distance"],
        [] if bm25 is None else corpus.shared_tags(entries[entry_id].index_tags),
    )
