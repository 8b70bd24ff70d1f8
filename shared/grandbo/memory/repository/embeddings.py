"""Embeddings are derived data: the worker reads an entry's current text and stores a
vector only for the revision it embedded; the sweeper finds what still lacks one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import sql

from grandbo.memory.domain.models import (
    EmbedJob,
)
from grandbo.memory.repository.entries import EntryReads
from grandbo.memory.repository.vectors import stored
from grandbo.storage.tenant_scope import Cursor, TenantLock

# An entry (alias e) lacks a current vector: none, one of another model (`%(rev)s` is the
# served model's embed_rev), or one of an older revision.
LACKS_CURRENT_VECTOR = sql.SQL(
    "(e.embed_rev IS DISTINCT FROM %(rev)s OR e.embedded_revision IS DISTINCT FROM e.revision)"
)
# A keyset page of embed jobs for the active entries (alias e) matching {predicate}.
_JOB_PAGE = (
    "SELECT tenant_id, entry_id, revision FROM org_memory_entries e"
    " WHERE tenant_id = %(tenant)s AND status = 'active' AND {predicate}"
    "   AND (%(after)s::uuid IS NULL OR entry_id > %(after)s)"
    " ORDER BY entry_id LIMIT %(limit)s"
)
# The same, less those whose job was sent within the window, marked as sent now.
_CLAIM_JOB_PAGE = (
    "UPDATE org_memory_entries u SET embed_enqueued_at = clock_timestamp()"
    " FROM (SELECT entry_id FROM org_memory_entries e"
    "   WHERE tenant_id = %(tenant)s AND status = 'active' AND {predicate}"
    "     AND (%(after)s::uuid IS NULL OR entry_id > %(after)s)"
    "     AND (embed_enqueued_at IS NULL"
    "          OR embed_enqueued_at < clock_timestamp() - make_interval(secs => %(window)s))"
    "   ORDER BY entry_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due"
    " WHERE u.tenant_id = %(tenant)s AND u.entry_id = due.entry_id"
    " RETURNING u.tenant_id, u.entry_id, u.revision"
)


def job_page(
    cur: Cursor,
    predicate: sql.Composable,
    params: dict[str, Any],
    claim_for_s: float | None,
) -> list[EmbedJob]:
    """Embed jobs of the active entries matching `predicate`, one keyset page (`params`:
    tenant, rev, after, limit). With `claim_for_s` (the sweeper), entries whose job was
    enqueued within that many seconds are left out, and those returned are marked
    enqueued now, in the same statement: two sweeps never send a job while it is in flight.
    """
    if claim_for_s is None:
        cur.execute(sql.SQL(_JOB_PAGE).format(predicate=predicate), params)
        return [EmbedJob(**row) for row in cur]
    cur.execute(
        sql.SQL(_CLAIM_JOB_PAGE).format(predicate=predicate), {**params, "window": claim_for_s}
    )
    return sorted((EmbedJob(**row) for row in cur), key=lambda job: job.entry_id)


@dataclass(frozen=True, slots=True)
class EntryForEmbedding:
    tenant_id: str
    entry_id: UUID
    revision: int
    title: str
    summary: str
    service: str | None


class EmbeddingStore(EntryReads):
    """The embedding columns: the only ones the embed worker writes."""

    def entries_for_embedding(
        self, tenant_id: str, entry_ids: Sequence[UUID], embed_rev: str
    ) -> list[EntryForEmbedding]:
        """Current text and revision of the given active entries that still lack a vector
        of `embed_rev` for that revision: a duplicate job (a redelivery, a sweep of a job
        already in flight) never reaches the provider, and costs no Bedrock call."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT tenant_id, entry_id, revision, title, summary, service"
                    " FROM org_memory_entries e"
                    " WHERE tenant_id = %(tenant)s AND entry_id = ANY(%(ids)s)"
                    "   AND status = 'active' AND {lacks}"
                ).format(lacks=LACKS_CURRENT_VECTOR),
                {"tenant": tenant_id, "ids": list(entry_ids), "rev": embed_rev},
            )
            return [EntryForEmbedding(**row) for row in cur]

    def store_embeddings(
        self,
        tenant_id: str,
        embed_rev: str,
        items: Sequence[tuple[UUID, int, Sequence[float]]],
        *,
        while_serving: bool = False,
    ) -> int:
        """Store vectors, each only if its entry is still at the revision that was embedded
        and was not redacted meanwhile (a tombstone never holds a vector; migration 0028
        holds it in the database too).

        One statement for the batch; returns how many were stored (a stale job, or one
        already applied, stores nothing).
        """
        if not items:
            return 0
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            cur.execute(
                "UPDATE org_memory_entries e SET embedding = v.embedding, embed_rev = %(rev)s,"
                " embedded_revision = v.revision, embedded_at = clock_timestamp()"
                # %b: vectors travel as 4-byte floats, not as 1,024 decimal strings
                " FROM unnest(%(ids)s::uuid[], %(revisions)s::int[], %(vectors)b::halfvec[])"
                "   AS v(entry_id, revision, embedding)"
                " WHERE e.tenant_id = %(tenant)s AND e.entry_id = v.entry_id"
                "   AND e.revision = v.revision"
                # a redaction does not move the revision: an embed of the text that finishes
                # after it would store the removed text's vector on the tombstone
                "   AND e.status <> 'redacted'"
                "   AND (e.embed_rev IS DISTINCT FROM %(rev)s"
                "        OR e.embedded_revision IS DISTINCT FROM v.revision)"
                # a previous model's vector (blue/green) only while the tenant serves it: a
                # worker that read the tenant before its switch never undoes the switch
                "   AND (NOT %(while_serving)s OR NOT EXISTS (SELECT 1"
                "        FROM org_memory_embed_serving sv"
                "        WHERE sv.tenant_id = %(tenant)s AND sv.embed_rev <> %(rev)s))",
                {
                    "rev": embed_rev,
                    "while_serving": while_serving,
                    "ids": [entry_id for entry_id, _, _ in items],
                    "revisions": [revision for _, revision, _ in items],
                    "vectors": [stored(v) for _, _, v in items],
                    "tenant": tenant_id,
                },
            )
            return cur.rowcount

    def jobs_needing_embedding(
        self,
        tenant_id: str,
        embed_rev: str,
        *,
        after: UUID | None = None,
        limit: int = 500,
        claim_for_s: float | None = None,
    ) -> list[EmbedJob]:
        """Active entries with no vector or one of an old `embed_rev`/revision, by id
        (keyset; `claim_for_s`: see `job_page`)."""
        params = {"tenant": tenant_id, "rev": embed_rev, "after": after, "limit": limit}
        with self._tenant_scope(tenant_id) as cur:
            return job_page(cur, LACKS_CURRENT_VECTOR, params, claim_for_s)

    def oldest_unembedded_at(self, tenant_id: str, embed_rev: str) -> Any:
        """When the longest-waiting active entry without a current vector was last written."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT min(updated_at) AS oldest FROM org_memory_entries e"
                    " WHERE tenant_id = %(tenant)s AND status = 'active' AND {lacks}"
                ).format(lacks=LACKS_CURRENT_VECTOR),
                {"tenant": tenant_id, "rev": embed_rev},
            )
            row = cur.fetchone()
            return None if row is None else row["oldest"]

    def vector_coverage(self, tenant_id: str, embed_rev: str) -> tuple[int, int]:
        """(active entries lacking a current vector of `embed_rev`, of those, how many hold
        a vector of another model or an older revision)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT count(*) AS lacking,"
                    " count(*) FILTER (WHERE embedding IS NOT NULL) AS stale"
                    " FROM org_memory_entries e"
                    " WHERE tenant_id = %(tenant)s AND status = 'active' AND {lacks}"
                ).format(lacks=LACKS_CURRENT_VECTOR),
                {"tenant": tenant_id, "rev": embed_rev},
            )
            row = cur.fetchone()
            return (0, 0) if row is None else (int(row["lacking"]), int(row["stale"]))

    def has_valid_vector_index(self, tenant_id: str, index: str) -> bool:
        """Whether the tenant's named HNSW index exists and is valid (from the catalog)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT i.indisvalid AS valid FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                (index,),
            )
            row = cur.fetchone()
            return bool(row is not None and row["valid"])
