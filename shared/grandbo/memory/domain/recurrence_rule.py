"""When two entries say the same thing: the duplicate rule behind recurrences.

A new entry that says what an active entry of its tenant already says (the same lesson,
maybe from another incident, in other words) is recorded as a recurrence of that entry
instead of a second entry; at query time, hits that say the same thing are collapsed into
the best one. Both use this one rule:

- the two texts' vectors are within the provider's `duplicate_distance` (cosine), AND
- their tags overlap: |A ∩ B| / min(|A|, |B|) of the informative tags is at least
  `MIN_TAG_OVERLAP` (a paraphrase keeps the rare words: the component, the error), AND
- they name no conflicting identifiers: when each names a version, a number or a ticket
  the other does not ("upgrade jQuery to 3.5.1" / "... to 3.6.0", "deploy 4812" /
  "deploy 4813"), they are two events, however alike their words, AND
- their services agree (the same service, or one of them names none), AND
- neither is marked never-merge by an admin (the callers check that).

The thresholds were chosen on a labelled set of duplicate pairs and near-misses
(`python -m bench.duplicate_rule`, figures in docs/EVAL.md): the highest recall at a
precision of at least 0.95, so that distinct lessons are not merged. A provider with no
measured `duplicate_distance` (None) merges nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from grandbo.memory.domain.models import EntryStatus, Kind, MemoryEntry

#: Informative tags two texts of one lesson share, as a share of the smaller tag set.
MIN_TAG_OVERLAP = 0.5


def tag_overlap(a: Collection[str], b: Collection[str]) -> float:
    """|A ∩ B| / min(|A|, |B|): 1.0 when one tag set holds the other."""
    return _overlap(frozenset(a), frozenset(b))


def _overlap(left: frozenset[str], right: frozenset[str]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / min(len(left), len(right))


def may_take_recurrence(canonical: MemoryEntry, new: MemoryEntry) -> bool:
    """Whether `new` may be merged into `canonical` (the rule's distance and tags aside):
    both active and not never-merge, `new` never corrected and without recurrences of its
    own, and `canonical` serving at least as long as `new` would: a durable lesson is
    never merged into an episodic entry, nor an episodic one into an entry expiring first
    (the recurrence would vanish with it; the query collapses the two meanwhile)."""
    if canonical.entry_id == new.entry_id:
        return False
    if canonical.status is not EntryStatus.ACTIVE or new.status is not EntryStatus.ACTIVE:
        return False
    if new.revision != 1 or new.seen_count != 1 or new.never_merge or canonical.never_merge:
        return False
    if canonical.kind is Kind.DURABLE:
        return True
    return (
        new.kind is Kind.EPISODIC
        and new.expires_at is not None
        and canonical.expires_at is not None
        and new.expires_at <= canonical.expires_at
    )


def _identifiers(tags: Collection[str]) -> set[str]:
    return {tag for tag in tags if any(ch.isdigit() for ch in tag)}


def conflicting_identifiers(a: Collection[str], b: Collection[str]) -> bool:
    """Each names an identifier (a tag with a digit) the other does not."""
    return _conflict(_identifiers(a), _identifiers(b))


def _conflict(left: AbstractSet[str], right: AbstractSet[str]) -> bool:
    return bool(left - right) and bool(right - left)


@dataclass(frozen=True, slots=True)
class DuplicateRule:
    """The rule with one provider's distance threshold."""

    max_distance: float
    min_tag_overlap: float = MIN_TAG_OVERLAP

    def same_lesson(
        self,
        distance: float,
        tags: Collection[str],
        other_tags: Collection[str],
        service: str | None = None,
        other_service: str | None = None,
    ) -> bool:
        return distance <= self.max_distance and self.words_agree(
            Words.of(tags, service), Words.of(other_tags, other_service)
        )

    def words_agree(self, a: Words, b: Words) -> bool:
        """The rule without the distance: tags, identifiers, services."""
        if a.service and b.service and a.service != b.service:
            return False
        return _overlap(a.tags, b.tags) >= self.min_tag_overlap and not _conflict(
            a.identifiers, b.identifiers
        )


@dataclass(frozen=True, slots=True)
class Words:
    """An entry's side of the rule, computed once (a query compares many pairs)."""

    tags: frozenset[str]
    identifiers: frozenset[str]
    service: str | None

    @classmethod
    def of(cls, tags: Collection[str], service: str | None = None) -> Words:
        return cls(frozenset(tags), frozenset(_identifiers(tags)), service)
