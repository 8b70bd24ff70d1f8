"""The embedding side of the service: embed jobs, the sweeper's pages, the backfill.

Vectors arrive after a write commits (DESIGN: write path); these methods are what the
embed worker, the sweeper and `grandbo embed-pending` call. `MemoryService` is built on
them; they read the repository, the models (`BlueGreen`) and the clock it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from uuid import UUID

from grandbo.embedding.base import EmbeddingProvider, render_entry_text
from grandbo.memory.domain.models import EmbedJob
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.vectors.blue_green import BlueGreen
from grandbo.memory.vectors.consolidation import Consolidation
from grandbo.tenancy import require_tenant

#: Wraps an iterable of a known number of items (a progress bar on a terminal).
Progress = Callable[[Iterable[list[EmbedJob]], int], Iterable[list[EmbedJob]]]


def tenants_of(repository: MemoryRepository, tenant_id: str | None) -> list[str]:
    """One tenant, or every tenant that has memory (sweeps visit each in its own scope)."""
    return [require_tenant(tenant_id)] if tenant_id else repository.tenant_ids()


class EmbeddingJobs(Consolidation):
    """Embedding work over a repository and the tenant's serving model."""

    repository: MemoryRepository
    blue_green: BlueGreen
    _clock: Callable[[], datetime]

    @property
    def provider(self) -> EmbeddingProvider:
        """The model new vectors are made with (and served, once a tenant switched)."""
        return self.blue_green.provider

    @provider.setter
    def provider(self, value: EmbeddingProvider) -> None:
        self.blue_green.provider = value

    def serving_provider(self, tenant_id: str) -> EmbeddingProvider:
        """The model a tenant's queries and served vectors use
        (`grandbo.memory.vectors.blue_green`)."""
        return self.blue_green.serving(tenant_id)

    def embed_jobs(self, jobs: Sequence[EmbedJob]) -> int:
        """Embed the entries the jobs name and store each vector under the revision guard.

        Jobs may span tenants; each tenant's entries are read and written in that tenant's
        own scope. Returns how many vectors were stored (stale or done jobs store none).
        Raises EmbeddingError if the provider fails: nothing is stored for that batch.
        New entries are then checked for recurrences (`grandbo.memory.vectors.consolidation`).
        A tenant being re-embedded (blue/green) gets the served model's vector for what it
        lacks and the new model's staged (`grandbo.memory.vectors.blue_green`).
        """
        by_tenant: dict[str, list[EmbedJob]] = {}
        for job in jobs:
            by_tenant.setdefault(job.tenant_id, []).append(job)
        stored = 0
        for tenant, tenant_jobs in by_tenant.items():
            wanted = {job.entry_id: job.revision for job in tenant_jobs}
            serving = self.serving_provider(tenant)
            entries = [
                e
                for e in self.repository.entries_for_embedding(
                    tenant, list(wanted), serving.embed_rev
                )
                if e.revision == wanted[e.entry_id]
            ]
            if entries:
                vectors = serving.embed(
                    [render_entry_text(e.title, e.summary, e.service) for e in entries]
                )
                stored += self.repository.store_embeddings(
                    tenant,
                    serving.embed_rev,
                    [(e.entry_id, e.revision, v) for e, v in zip(entries, vectors, strict=True)],
                    while_serving=serving is not self.provider,
                )
            # a new entry that says what an older one says becomes its recurrence (every
            # job of the batch: a redelivery finishes a merge an earlier delivery lost)
            self.consolidate_after_embedding(tenant, list(wanted.items()), serving)
            if serving is not self.provider:
                stored += self.blue_green.stage(tenant, wanted)
        return stored

    def pending_job_pages(
        self,
        tenant_id: str | None = None,
        *,
        page_size: int = 500,
        claim_for_s: float | None = None,
    ) -> Iterator[list[EmbedJob]]:
        """Pages of active entries (of one tenant, or of all) lacking a current vector.

        Each tenant is read in its own scope; every job carries its tenant. With
        `claim_for_s` (the sweeper) jobs enqueued that recently are skipped and the ones
        returned are marked enqueued. A tenant being re-embedded also yields the entries
        still lacking a staged vector of the new model.
        """
        for tenant in tenants_of(self.repository, tenant_id):
            serving = self.serving_provider(tenant)
            after: UUID | None = None
            while True:
                page = self.repository.jobs_needing_embedding(
                    tenant,
                    serving.embed_rev,
                    after=after,
                    limit=page_size,
                    claim_for_s=claim_for_s,
                )
                if page:
                    yield page
                if len(page) < page_size:
                    break
                after = page[-1].entry_id
            if serving is not self.provider:
                yield from self.blue_green.staging_job_pages(
                    tenant, page_size=page_size, claim_for_s=claim_for_s
                )

    def oldest_pending_age_s(self, tenant_id: str | None = None) -> float:
        """Seconds the longest-waiting entry (of one tenant, or all) has lacked a vector."""
        now = self._clock()
        ages = [
            (now - oldest).total_seconds()
            for tenant in tenants_of(self.repository, tenant_id)
            if (
                oldest := self.repository.oldest_unembedded_at(
                    tenant, self.serving_provider(tenant).embed_rev
                )
            )
        ]
        return max(ages, default=0.0)

    def pending_jobs(self, tenant_id: str | None = None) -> list[EmbedJob]:
        return [job for page in self.pending_job_pages(tenant_id) for job in page]

    def embed_pending(
        self,
        tenant_id: str | None = None,
        *,
        batch_size: int = 64,
        progress: Progress | None = None,
    ) -> int:
        """Backfill in-process: embed everything pending (the sweeper's work, synchronously).
        `progress` wraps the batches (with their count): `grandbo embed-pending` shows it."""
        jobs = self.pending_jobs(tenant_id)
        batches: Iterable[list[EmbedJob]] = (
            jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)
        )
        if progress is not None:
            batches = progress(batches, -(-len(jobs) // batch_size))
        return sum(self.embed_jobs(batch) for batch in batches)
