"""Blue/green re-embedding: the new model's vectors are staged beside the served ones,
and a tenant switches to them in one transaction once they cover enough of it."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from psycopg import sql

from grandbo.memory.domain.models import EmbedJob
from grandbo.memory.repository.embeddings import EntryForEmbedding, job_page
from grandbo.memory.repository.entries import EntryReads
from grandbo.memory.repository.vectors import stored
from grandbo.storage.tenant_scope import Cursor, TenantLock

# A staged vector counts while it is of the entry's current revision.
_STAGED_CURRENT = sql.SQL(
    "EXISTS (SELECT 1 FROM org_memory_staged_vectors s"
    " WHERE s.tenant_id = e.tenant_id AND s.entry_id = e.entry_id"
    "   AND s.embed_rev = %(rev)s AND s.revision = e.revision)"
)
_NOT_STAGED = sql.SQL("NOT {staged}").format(staged=_STAGED_CURRENT)


class VectorStaging(EntryReads):
    """The staged vectors of a model a tenant does not serve yet, and the switch."""

    def serving_rev(self, tenant_id: str) -> str | None:
        """The embed_rev the tenant was switched to, or None (it serves the previous one)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT embed_rev FROM org_memory_embed_serving WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            return None if row is None else str(row["embed_rev"])

    def entries_for_staging(
        self, tenant_id: str, entry_ids: Sequence[UUID], embed_rev: str
    ) -> list[EntryForEmbedding]:
        """Active entries among `entry_ids` without a staged vector of `embed_rev` for their
        current revision."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT tenant_id, entry_id, revision, title, summary, service"
                    " FROM org_memory_entries e"
                    " WHERE tenant_id = %(tenant)s AND entry_id = ANY(%(ids)s)"
                    "   AND status = 'active' AND {missing}"
                ).format(missing=_NOT_STAGED),
                {"tenant": tenant_id, "ids": list(entry_ids), "rev": embed_rev},
            )
            return [EntryForEmbedding(**row) for row in cur]

    def stage_vectors(
        self,
        tenant_id: str,
        embed_rev: str,
        items: Sequence[tuple[UUID, int, Sequence[float]]],
    ) -> int:
        """Stage vectors of `embed_rev`, each only if its entry is still at that revision."""
        if not items:
            return 0
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            cur.execute(
                "INSERT INTO org_memory_staged_vectors"
                "   (tenant_id, entry_id, embed_rev, revision, embedding)"
                " SELECT %(tenant)s, v.entry_id, %(rev)s, v.revision, v.embedding"
                " FROM unnest(%(ids)s::uuid[], %(revisions)s::int[], %(vectors)b::halfvec[])"
                "   AS v(entry_id, revision, embedding)"
                " JOIN org_memory_entries e"
                "   ON e.tenant_id = %(tenant)s AND e.entry_id = v.entry_id"
                "  AND e.revision = v.revision"
                # a worker that read the tenant before it switched stages nothing after
                " WHERE NOT EXISTS (SELECT 1 FROM org_memory_embed_serving sv"
                "   WHERE sv.tenant_id = %(tenant)s AND sv.embed_rev = %(rev)s)"
                " ON CONFLICT (tenant_id, embed_rev, entry_id) DO UPDATE"
                "   SET revision = excluded.revision, embedding = excluded.embedding,"
                "       embedded_at = clock_timestamp()"
                "   WHERE org_memory_staged_vectors.revision < excluded.revision",
                {
                    "tenant": tenant_id,
                    "rev": embed_rev,
                    "ids": [entry_id for entry_id, _, _ in items],
                    "revisions": [revision for _, revision, _ in items],
                    "vectors": [stored(v) for _, _, v in items],
                },
            )
            return cur.rowcount

    def staged_coverage(self, tenant_id: str, embed_rev: str) -> tuple[int, int]:
        """(active entries with a current staged vector of `embed_rev`, active entries)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT count(*) FILTER (WHERE {staged}) AS covered, count(*) AS active"
                    " FROM org_memory_entries e WHERE tenant_id = %(tenant)s AND status = 'active'"
                ).format(staged=_STAGED_CURRENT),
                {"tenant": tenant_id, "rev": embed_rev},
            )
            row = cur.fetchone()
            return (0, 0) if row is None else (int(row["covered"]), int(row["active"]))

    def missing_staged(self, tenant_id: str, embed_rev: str, probe: int) -> int:
        """How many active entries lack a current staged vector of `embed_rev`, counted
        up to `probe` (the scan stops there: cheap while many are missing)."""
        with self._tenant_scope(tenant_id) as cur:
            return self._missing(cur, tenant_id, embed_rev, probe)

    def switch_serving(self, tenant_id: str, embed_rev: str, allowed_missing: int) -> int | None:
        """Serve `embed_rev` from now on, if at most `allowed_missing` active entries lack
        a staged vector of it: the staged vectors replace the served ones, the entries
        without one lose theirs (they are pending for the new model, and the sweeper sends
        them), the staging empties. One transaction under the tenant's exclusive lock, so
        a query sees before or after, never a mix, and one switch happens, not several.
        Returns how many active entries got their new vector, or None (not switched)."""
        with self._tenant_scope(tenant_id, lock=TenantLock.EXCLUSIVE) as cur:
            params = {"tenant": tenant_id, "rev": embed_rev}
            cur.execute(
                "SELECT 1 FROM org_memory_embed_serving"
                " WHERE tenant_id = %(tenant)s AND embed_rev = %(rev)s",
                params,
            )
            if cur.fetchone() is not None:
                return None  # switched already (a concurrent worker won)
            if self._missing(cur, tenant_id, embed_rev, allowed_missing + 1) > allowed_missing:
                return None
            cur.execute(
                "UPDATE org_memory_entries e SET embedding = s.embedding, embed_rev = s.embed_rev,"
                " embedded_revision = s.revision, embedded_at = s.embedded_at"
                " FROM org_memory_staged_vectors s"
                " WHERE e.tenant_id = %(tenant)s AND e.status = 'active'"
                "   AND s.tenant_id = e.tenant_id AND s.entry_id = e.entry_id"
                "   AND s.embed_rev = %(rev)s AND s.revision = e.revision",
                params,
            )
            switched = cur.rowcount
            cur.execute(
                "UPDATE org_memory_entries SET embedding = NULL, embed_rev = NULL,"
                " embedded_revision = NULL, embedded_at = NULL, embed_enqueued_at = NULL"
                " WHERE tenant_id = %(tenant)s AND embed_rev IS DISTINCT FROM %(rev)s"
                "   AND embedding IS NOT NULL",
                params,
            )
            cur.execute(
                "DELETE FROM org_memory_staged_vectors WHERE tenant_id = %(tenant)s", params
            )
            cur.execute(
                "INSERT INTO org_memory_embed_serving (tenant_id, embed_rev)"
                " VALUES (%(tenant)s, %(rev)s) ON CONFLICT (tenant_id)"
                " DO UPDATE SET embed_rev = excluded.embed_rev, switched_at = clock_timestamp()",
                params,
            )
            return switched

    @staticmethod
    def _missing(cur: Cursor, tenant_id: str, embed_rev: str, probe: int) -> int:
        cur.execute(
            sql.SQL(
                "SELECT count(*) AS missing FROM (SELECT 1 FROM org_memory_entries e"
                " WHERE tenant_id = %(tenant)s AND status = 'active' AND {missing}"
                " LIMIT %(probe)s) m"
            ).format(missing=_NOT_STAGED),
            {"tenant": tenant_id, "rev": embed_rev, "probe": probe},
        )
        row = cur.fetchone()
        return 0 if row is None else int(row["missing"])

    def active_entries(self, tenant_id: str) -> int:
        """The tenant's active entries, from the statistics the write path keeps."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT active_entries FROM org_memory_tenant_stats WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["active_entries"])

    def jobs_needing_staging(
        self,
        tenant_id: str,
        embed_rev: str,
        *,
        after: UUID | None = None,
        limit: int = 500,
        claim_for_s: float | None = None,
    ) -> list[EmbedJob]:
        """Active entries without a current staged vector of `embed_rev`, by id (keyset;
        `claim_for_s` claims them with the same in-flight mark, see `job_page`)."""
        params = {"tenant": tenant_id, "rev": embed_rev, "after": after, "limit": limit}
        with self._tenant_scope(tenant_id) as cur:
            return job_page(cur, _NOT_STAGED, params, claim_for_s)
