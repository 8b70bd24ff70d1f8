"""Memory that stays five different lessons: recurrences merged after embedding, split
back out by an admin, and hits that say the same thing collapsed at query time.

Detection runs in the embed worker, once a new entry's vector is stored (the vector
arrives after the write commits): its nearest older active entries are read, and the
first that passes the duplicate rule (`grandbo.memory.domain.recurrence_rule`) takes it as a
recurrence. Until then, and for near-duplicates the rule meets only at query time (an
admin's entry, a corrected one), the query collapses them into the best hit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from grandbo.embedding.base import EmbeddingProvider
from grandbo.errors import InvalidInputError
from grandbo.memory.domain.idempotency import KeySpace, idempotency_key
from grandbo.memory.domain.models import MemoryEntry, WriteContext, WriteOutcome
from grandbo.memory.domain.recurrence_rule import (
    DuplicateRule,
    Words,
    may_take_recurrence,
    tag_overlap,
)
from grandbo.memory.repository import MemoryRepository
from grandbo.tenancy import require_tenant

_log = logging.getLogger(__name__)

CONSOLIDATION_ACTOR = "grandbo-consolidation"
MERGE_ATTEMPTS = 3
# an admin's listing of an entry's recurrences: the latest this many (a response stays
# far below Lambda's 6 MB however often a lesson recurs)
MAX_LISTED_RECURRENCES = 100


def duplicate_rule(provider: EmbeddingProvider) -> DuplicateRule | None:
    """The rule with the provider's measured distance; None (merge nothing) if unmeasured."""
    if provider.duplicate_distance is None:
        return None
    return DuplicateRule(provider.duplicate_distance)


@dataclass(slots=True)
class Lesson:
    """One hit of a query and the entries collapsed into it."""

    entry: MemoryEntry
    collapsed: list[MemoryEntry] = field(default_factory=list)

    @property
    def entries(self) -> list[MemoryEntry]:
        """The hit's entry, then those collapsed into it."""
        return [self.entry, *self.collapsed]

    @property
    def recurrences(self) -> int:
        return self.entry.seen_count + sum(e.seen_count for e in self.collapsed)

    @property
    def last_seen_at(self) -> datetime:
        return max(e.last_seen_at or e.created_at for e in [self.entry, *self.collapsed])

    @property
    def also_seen_in(self) -> list[str]:
        seen = set(self.entry.seen_in_incidents)
        for other in self.collapsed:
            seen.update(other.seen_in_incidents)
            if other.incident_id is not None:
                seen.add(other.incident_id)
        seen.discard(self.entry.incident_id or "")
        return sorted(seen)


class Consolidation:
    """Recurrences over the repository (a base of `MemoryService`)."""

    repository: MemoryRepository

    @property
    def reader(self) -> MemoryRepository:
        """Where queries read (a reader when reads scale out); MemoryService's."""
        return self.repository

    def consolidate(
        self, tenant_id: str, entry_ids: Sequence[UUID], provider: EmbeddingProvider
    ) -> int:
        """Merge each new entry that says what an older active entry says into it; returns
        how many were merged. Called once the entries' vectors of `provider` are stored."""
        rule = duplicate_rule(provider)
        if rule is None:
            return 0
        merged = 0
        for entry_id in entry_ids:
            # a concurrent worker may merge the chosen entry away between the read and the
            # locked write: read again (a few times) rather than leave a recurrence unmerged
            for _ in range(MERGE_ATTEMPTS):
                found = self.repository.recurrence_candidates(
                    tenant_id, entry_id, provider.embed_rev
                )
                if found is None:  # merged meanwhile, corrected, or never-merge
                    break
                entry, nearest = found
                same = [
                    (candidate, distance)
                    for candidate, distance in nearest
                    if may_take_recurrence(candidate, entry)
                    and rule.same_lesson(
                        distance,
                        entry.index_tags,
                        candidate.index_tags,
                        entry.service,
                        candidate.service,
                    )
                ]
                if not same:
                    break
                # the established lesson takes it: the most recurrences, then the oldest
                candidate, distance = min(
                    same, key=lambda c: (-c[0].seen_count, c[0].created_at, c[0].entry_id)
                )
                outcome = self.repository.merge_recurrence(
                    tenant_id,
                    entry_id,
                    candidate.entry_id,
                    candidate.revision,
                    {
                        "distance": round(distance, 6),
                        "tag_overlap": round(
                            tag_overlap(entry.index_tags, candidate.index_tags), 4
                        ),
                        "embed_rev": provider.embed_rev,
                    },
                    WriteContext(
                        actor=CONSOLIDATION_ACTOR,
                        idempotency_key=idempotency_key(KeySpace.RECURRENCE, str(entry_id)),
                    ),
                )
                if outcome.applied:
                    merged += 1
                    _log.info(
                        "entry %s recorded as a recurrence of %s (seen %s times)",
                        entry_id,
                        candidate.entry_id,
                        outcome.entry.seen_count,
                    )
                    break
        return merged

    def consolidate_after_embedding(
        self, tenant_id: str, jobs: Sequence[tuple[UUID, int]], provider: EmbeddingProvider
    ) -> int:
        """`consolidate` the new entries (revision 1) an embed batch named, whether this
        delivery stored their vectors or an earlier one did: a merge cut short (a lost
        connection, a lock timeout) fails the batch, and its redelivery merges."""
        new = [entry_id for entry_id, revision in jobs if revision == 1]
        return self.consolidate(tenant_id, new, provider) if new else 0

    def collapse(
        self,
        tenant_id: str,
        ranked: Sequence[MemoryEntry],
        provider: EmbeddingProvider,
        limit: int,
    ) -> list[Lesson]:
        """The first `limit` different lessons of `ranked` (best first): an entry that says
        what a better-ranked one says is folded into it instead of taking a slot."""
        rule = duplicate_rule(provider)
        if rule is None:
            return [Lesson(entry) for entry in ranked[:limit]]
        # the rule's word checks first (tags, identifiers, services: no vectors needed);
        # only the entries of pairs passing them need their distances read, usually none
        words = {e.entry_id: Words.of(e.index_tags, e.service) for e in ranked}
        agree: set[tuple[UUID, UUID]] = set()
        for i, entry in enumerate(ranked):
            for other in ranked[:i]:
                if not (entry.never_merge or other.never_merge) and rule.words_agree(
                    words[entry.entry_id], words[other.entry_id]
                ):
                    agree.add((entry.entry_id, other.entry_id))
        paired = {entry_id for pair in agree for entry_id in pair}
        distances = (
            self.reader.distances_between(tenant_id, sorted(paired), provider.embed_rev)
            if paired
            else {}
        )
        lessons: list[Lesson] = []
        for entry in ranked:
            same = next(
                (
                    lesson
                    for lesson in lessons
                    if (entry.entry_id, lesson.entry.entry_id) in agree
                    and distances.get((entry.entry_id, lesson.entry.entry_id), 2.0)
                    <= rule.max_distance
                ),
                None,
            )
            if same is not None:
                same.collapsed.append(entry)
            elif len(lessons) < limit:
                lessons.append(Lesson(entry))
        return lessons

    # -- admin -------------------------------------------------------------------------

    def split_recurrence(
        self, tenant_id: str, entry_id: UUID, context: WriteContext
    ) -> WriteOutcome:
        """A wrongly merged entry becomes its own entry again (and is never merged again)."""
        return self.repository.split_recurrence(require_tenant(tenant_id), entry_id, context)

    def set_never_merge(
        self, tenant_id: str, entry_id: UUID, never_merge: object, context: WriteContext
    ) -> WriteOutcome:
        if not isinstance(never_merge, bool):
            raise InvalidInputError("never_merge", "must be true or false")
        return self.repository.set_never_merge(
            require_tenant(tenant_id), entry_id, never_merge, context
        )

    def recurrences_of(
        self, tenant_id: str, entry_id: UUID, *, limit: int = MAX_LISTED_RECURRENCES
    ) -> list[MemoryEntry]:
        """The latest recurrences of an entry, newest first (at most `limit`)."""
        return self.repository.recurrences_of(require_tenant(tenant_id), entry_id, limit=limit)
