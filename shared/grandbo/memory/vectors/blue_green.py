"""Blue/green re-embedding: a model change without a dip in recall.

During a model change the service has two providers: the new one (`provider`) and the
previous one. A tenant keeps being served from the previous model's vectors while the new
model's are staged beside them; once they cover SWITCH_COVERAGE of its active entries, it
switches in one transaction (`VectorStaging.switch_serving`). New and corrected entries
get a previous-model vector at once (served) and a staged one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from uuid import UUID

from grandbo.embedding.base import EmbeddingProvider, render_entry_text
from grandbo.memory.domain.models import EmbedJob
from grandbo.memory.repository import MemoryRepository

_log = logging.getLogger(__name__)

# A tenant switches once the new model's vectors cover this share of its active entries
# (the rest lose their old vector at the switch and are embedded by the sweeper): 98 %
# keeps a few poison entries from holding a tenant on the old model forever, and costs
# the vector leg at most 2 % of entries for a sweep.
SWITCH_COVERAGE = 0.98


class BlueGreen:
    """Which model serves a tenant, the staging of the new one, and the switch."""

    def __init__(
        self,
        repository: MemoryRepository,
        provider: EmbeddingProvider,
        previous: EmbeddingProvider | None,
    ) -> None:
        self.repository = repository
        self.provider = provider
        self.previous = previous if previous and previous.embed_rev != provider.embed_rev else None

    def serving(self, tenant: str) -> EmbeddingProvider:
        """The new model once the tenant switched (or when no change is in progress)."""
        if self.previous is None:
            return self.provider
        if self.repository.serving_rev(tenant) == self.provider.embed_rev:
            return self.provider
        return self.previous

    def switched_since(self, tenant: str, served: EmbeddingProvider) -> bool:
        """Whether the tenant switched after `served` was chosen (a query then searched
        for vectors the switch had just replaced)."""
        return (
            served is self.previous
            and self.repository.serving_rev(tenant) == self.provider.embed_rev
        )

    def stage(self, tenant: str, wanted: dict[UUID, int]) -> int:
        """Stage the new model's vectors of these entries; switch the tenant if covered."""
        rev = self.provider.embed_rev
        entries = [
            e
            for e in self.repository.entries_for_staging(tenant, list(wanted), rev)
            if e.revision == wanted[e.entry_id]
        ]
        if not entries:
            return 0
        vectors = self.provider.embed(
            [render_entry_text(e.title, e.summary, e.service) for e in entries]
        )
        staged = self.repository.stage_vectors(
            tenant,
            rev,
            [(e.entry_id, e.revision, v) for e, v in zip(entries, vectors, strict=True)],
        )
        if staged:
            self.switch_if_covered(tenant)
        return staged

    def switch_if_covered(self, tenant: str) -> bool:
        """Switch the tenant if the staged vectors cover it (however that came about: by
        staging, or by retiring the entries that lacked one; a tenant with no active
        entry is covered). Cheap while much is missing: the count stops past the limit."""
        rev = self.provider.embed_rev
        active = self.repository.active_entries(tenant)
        allowed = math.floor(active * (1 - SWITCH_COVERAGE) + 1e-9)
        if self.repository.missing_staged(tenant, rev, allowed + 1) > allowed:
            return False
        carried = self.repository.switch_serving(tenant, rev, allowed)
        if carried is None:
            return False
        _log.warning(
            "tenant %s switched to embed_rev %s: %d of %d active entries carried over",
            tenant,
            rev,
            carried,
            active,
        )
        return True

    def staging_job_pages(
        self, tenant: str, *, page_size: int, claim_for_s: float | None
    ) -> Iterator[list[EmbedJob]]:
        """Pages of the tenant's entries still lacking a staged vector; when none is left
        to send, the tenant is switched if covered."""
        after: UUID | None = None
        sent = 0
        while True:
            page = self.repository.jobs_needing_staging(
                tenant,
                self.provider.embed_rev,
                after=after,
                limit=page_size,
                claim_for_s=claim_for_s,
            )
            sent += len(page)
            if page:
                yield page
            if len(page) < page_size:
                break
            after = page[-1].entry_id
        if sent == 0:
            self.switch_if_covered(tenant)
