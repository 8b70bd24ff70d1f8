"""Recurrences: an entry merged into the active entry that already says the same thing,
split back out by an admin, or marked never-merge. Each is an event on the entry that
changes; the canonical entry's count, last-seen time and incidents are derived from the
entries merged into it (as `grandbo.memory.domain.projection.derive_recurrences` derives them).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal
from uuid import UUID

import psycopg
from psycopg import sql

from grandbo.errors import EntryNotActiveError, EntryNotFoundError, NotARecurrenceError
from grandbo.memory.domain.models import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    EntryStatus,
    EventType,
    MemoryEntry,
    RecurrencesRehomed,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.domain.recurrence_rule import DuplicateRule, Words, may_take_recurrence
from grandbo.memory.repository.entries import SELECT_ENTRIES, entry_columns
from grandbo.memory.repository.postings import post_tags, unpost_tags
from grandbo.memory.repository.search import VECTOR_LEG_SETTINGS
from grandbo.memory.repository.vectors import stored
from grandbo.memory.repository.writes import EntryWrites
from grandbo.storage.tenant_scope import Cursor, TenantLock

_PAIR_DISTANCES = "SELECT a, b, d FROM grandbo_pair_distances(%s, %s::uuid[], %s)"

# A new entry that may still be merged: active, never corrected, no recurrence of its own
# and not marked never-merge, with a vector of the served model.
_MERGEABLE = sql.SQL(
    "SELECT embedding AS vector, {columns} FROM org_memory_entries"
    " WHERE tenant_id = %s AND entry_id = %s AND status = 'active' AND revision = 1"
    "   AND seen_count = 1 AND NOT never_merge AND embed_rev = %s"
).format(columns=entry_columns())
# The nearest older active entries that may take a recurrence (older: two new entries
# embedded at once can never be merged into each other). Entries at one distance across
# the limit go as the choice among the nearest does (Consolidation.consolidate): the most
# recurrences, then the oldest. Chosen in the order a plan read them, repeats of one text
# (distance 0) could crowd out the lesson they repeat, and a batch merged newest first
# made the youngest a sibling's recurrence and the rest followed it (a CI failure of the
# concurrent-workers test).
_NEAREST_OLDER = sql.SQL(
    "SELECT {columns}, n.distance FROM ("
    "   SELECT entry_id, embedding <=> %(q)b AS distance FROM org_memory_entries"
    "   WHERE tenant_id = %(tenant)s AND status = 'active' AND embed_rev = %(rev)s"
    "     AND NOT never_merge AND (created_at, entry_id) < (%(created)s, %(entry)s)"
    "   ORDER BY embedding <=> %(q)b, seen_count DESC, created_at, entry_id"
    "   LIMIT %(limit)s"
    " ) n JOIN org_memory_entries e ON e.tenant_id = %(tenant)s AND e.entry_id = n.entry_id"
    " ORDER BY n.distance, e.entry_id"
).format(columns=entry_columns("e"))
# What the write path derives for an entry from the entries merged into it.
DERIVE_RECURRENCES = (
    "UPDATE org_memory_entries c SET"
    " seen_count = 1 + (SELECT count(*) FROM org_memory_entries d"
    "   WHERE d.tenant_id = c.tenant_id AND d.merged_into = c.entry_id),"
    " last_seen_at = (SELECT max(d.created_at) FROM org_memory_entries d"
    "   WHERE d.tenant_id = c.tenant_id AND d.merged_into = c.entry_id),"
    ' seen_in_incidents = ARRAY(SELECT DISTINCT d.incident_id COLLATE "C"'
    "   FROM org_memory_entries d WHERE d.tenant_id = c.tenant_id"
    "     AND d.merged_into = c.entry_id AND d.incident_id IS NOT NULL"
    "     AND d.incident_id IS DISTINCT FROM c.incident_id ORDER BY 1)"
    " WHERE c.tenant_id = %s AND c.entry_id = %s"
)


class RecurrenceWrites(EntryWrites):
    """Merge, split, the never-merge mark, and recurrences rehomed when their canonical
    entry is retired, superseded or corrected to another lesson."""

    def _rehome_recurrences(
        self,
        cur: Cursor,
        tenant_id: str,
        entry_id: UUID,
        successor: UUID | None,
        context: WriteContext,
        still_agreeing: MemoryEntry | None = None,
    ) -> RecurrencesRehomed | None:
        """Move the entries merged into `entry_id` to `successor` (each an `entry_merged`
        event saying where it moved from), unless the successor is marked never-merge;
        else the oldest resurfaces as an active entry (an `entry_split` that keeps its
        merge policy) and the others become its recurrences. Never left merged into an
        entry that no longer says their lesson. After a correction (`still_agreeing`, the
        corrected entry), those whose words still agree with its new text by the merge
        rule (tags, identifiers, service: its vector is not made yet) stay."""
        cur.execute(
            SELECT_ENTRIES + sql.SQL("merged_into = %s ORDER BY created_at, entry_id FOR UPDATE"),
            (tenant_id, entry_id),
        )
        merged = [MemoryEntry.model_validate(row) for row in cur]
        kept = 0
        if still_agreeing is not None:
            new_words = Words.of(still_agreeing.index_tags, still_agreeing.service)
            rule = DuplicateRule(max_distance=0.0)  # its words part only
            leaving = [
                m
                for m in merged
                if not rule.words_agree(new_words, Words.of(m.index_tags, m.service))
            ]
            kept, merged = len(merged) - len(leaving), leaving
            if kept and not merged:
                return RecurrencesRehomed(how="kept", entry_id=entry_id, count=0, kept=kept)
        if not merged:
            return None
        target = successor
        # the successor's row is locked (retire_entry locks both rows in entry-id order)
        if target is not None and self._get(cur, tenant_id, target).never_merge:
            target = None
        how: Literal["moved", "resurfaced"] = "moved"
        movers = merged
        if target is None:
            how, first, movers = "resurfaced", merged[0], merged[1:]
            target = first.entry_id
            recorded_at = self._append_event(
                cur,
                tenant_id,
                first.entry_id,
                EventType.SPLIT,
                first.revision,
                {"split_from": str(entry_id), "resurfaced": True, "never_merge": first.never_merge},
                _derived(context, first.entry_id),
            )
            cur.execute(
                "UPDATE org_memory_entries SET status = 'active', merged_into = NULL,"
                " updated_at = %s WHERE tenant_id = %s AND entry_id = %s",
                (recorded_at, tenant_id, first.entry_id),
            )
            self._count_tags(cur, tenant_id, entering=[first.index_tags])
            post_tags(cur, tenant_id, [self._get(cur, tenant_id, first.entry_id)])
        for mover in movers:
            recorded_at = self._append_event(
                cur,
                tenant_id,
                mover.entry_id,
                EventType.MERGED,
                mover.revision,
                {"merged_into": str(target), "moved_from": str(entry_id)},
                _derived(context, mover.entry_id),
            )
            cur.execute(
                "UPDATE org_memory_entries SET merged_into = %s, updated_at = %s"
                " WHERE tenant_id = %s AND entry_id = %s",
                (target, recorded_at, tenant_id, mover.entry_id),
            )
        cur.execute(DERIVE_RECURRENCES, (tenant_id, entry_id))
        cur.execute(DERIVE_RECURRENCES, (tenant_id, target))
        return RecurrencesRehomed(how=how, entry_id=target, count=len(merged), kept=kept)

    def recurrence_candidates(
        self, tenant_id: str, entry_id: UUID, embed_rev: str, *, limit: int = 5
    ) -> tuple[MemoryEntry, list[tuple[MemoryEntry, float]]] | None:
        """The entry, if it may still be merged, and its nearest older active entries with
        their cosine distances (vectors of `embed_rev`); None if it may not."""
        with self._tenant_scope(tenant_id, VECTOR_LEG_SETTINGS) as cur:
            cur.execute(_MERGEABLE, (tenant_id, entry_id, embed_rev))
            row = cur.fetchone()
            if row is None:
                return None
            vector = row.pop("vector")
            entry = MemoryEntry.model_validate(row)
            cur.execute(
                _NEAREST_OLDER,
                {
                    "q": stored(vector),
                    "tenant": tenant_id,
                    "rev": embed_rev,
                    "created": entry.created_at,
                    "entry": entry.entry_id,
                    "limit": limit,
                },
            )
            nearest = []
            for found in cur:
                distance = float(found.pop("distance"))
                nearest.append((MemoryEntry.model_validate(found), distance))
            return entry, nearest

    def merge_recurrence(
        self,
        tenant_id: str,
        entry_id: UUID,
        into: UUID,
        into_revision: int,
        evidence: dict[str, Any],
        context: WriteContext,
    ) -> WriteOutcome:
        """Record `entry_id` as a recurrence of `into` (`entry_merged`), if both still
        qualify once their rows are locked and `into` still says what was compared (its
        revision is `into_revision`); applied=False (and nothing written) if not.
        The outcome's entry is the canonical one, with its count."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            if self._already_applied(cur, tenant_id, context) is not None:
                return WriteOutcome(entry=self._get(cur, tenant_id, into), applied=False)
            rows = self._lock_rows(cur, tenant_id, [entry_id, into])
            if entry_id not in rows or into not in rows:
                raise EntryNotFoundError(entry_id if entry_id not in rows else into)
            new, canonical = rows[entry_id], rows[into]
            if canonical.revision != into_revision or not may_take_recurrence(canonical, new):
                return WriteOutcome(entry=canonical, applied=False)
            recorded_at = self._append_event(
                cur,
                tenant_id,
                entry_id,
                EventType.MERGED,
                new.revision,
                {"merged_into": str(into), **evidence},
                context,
            )
            if recorded_at is None:
                return WriteOutcome(entry=self._get(cur, tenant_id, into), applied=False)
            cur.execute(
                "UPDATE org_memory_entries SET status = 'merged', merged_into = %s,"
                " updated_at = %s WHERE tenant_id = %s AND entry_id = %s",
                (into, recorded_at, tenant_id, entry_id),
            )
            self._count_tags(cur, tenant_id, leaving=[new.index_tags])
            unpost_tags(cur, tenant_id, entry_id)
            cur.execute(DERIVE_RECURRENCES, (tenant_id, into))
            return WriteOutcome(entry=self._get(cur, tenant_id, into), applied=True)

    def split_recurrence(
        self, tenant_id: str, entry_id: UUID, context: WriteContext
    ) -> WriteOutcome:
        """A merged entry becomes its own active entry again, marked never-merge."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            if (done := self._already_applied(cur, tenant_id, context)) is not None:
                return done
            merged = self._get(cur, tenant_id, entry_id)
            if merged.status is not EntryStatus.MERGED or merged.merged_into is None:
                raise NotARecurrenceError(entry_id, merged.status.value)
            into = merged.merged_into
            rows = self._lock_rows(cur, tenant_id, [entry_id, into])
            if (done := self._already_applied(cur, tenant_id, context)) is not None:
                return done
            merged = rows[entry_id]
            if merged.merged_into != into:  # split meanwhile by another request
                raise NotARecurrenceError(entry_id, merged.status.value)
            recorded_at = self._append_event(
                cur,
                tenant_id,
                entry_id,
                EventType.SPLIT,
                merged.revision,
                {"split_from": str(into)},
                context,
            )
            if recorded_at is None:
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET status = 'active', merged_into = NULL,"
                " never_merge = true, updated_at = %s WHERE tenant_id = %s AND entry_id = %s",
                (recorded_at, tenant_id, entry_id),
            )
            self._count_tags(cur, tenant_id, entering=[merged.index_tags])
            restored = self._get(cur, tenant_id, entry_id)
            post_tags(cur, tenant_id, [restored])
            cur.execute(DERIVE_RECURRENCES, (tenant_id, into))
            return WriteOutcome(entry=restored, applied=True)

    def set_never_merge(
        self, tenant_id: str, entry_id: UUID, never_merge: bool, context: WriteContext
    ) -> WriteOutcome:
        """Mark an entry never-merge (nothing is merged into it, it is merged into nothing,
        and no hit is collapsed with it), or clear the mark."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            current = self._lock_unless_applied(cur, tenant_id, entry_id, context, active=False)
            if isinstance(current, WriteOutcome):
                return current
            if current.status is EntryStatus.MERGED:
                raise EntryNotActiveError(entry_id, f"{current.status.value}: split it first")
            if current.never_merge is never_merge:
                return WriteOutcome(entry=current, applied=False)
            recorded_at = self._append_event(
                cur,
                tenant_id,
                entry_id,
                EventType.MERGE_POLICY,
                current.revision,
                {"never_merge": never_merge},
                context,
            )
            if recorded_at is None:
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET never_merge = %s"
                " WHERE tenant_id = %s AND entry_id = %s",
                (never_merge, tenant_id, entry_id),
            )
            return WriteOutcome(entry=self._get(cur, tenant_id, entry_id), applied=True)

    def recurrences_of(
        self, tenant_id: str, entry_id: UUID, *, limit: int = 100
    ) -> list[MemoryEntry]:
        """The latest `limit` entries merged into `entry_id`, newest first (each can be
        split back out; the entry's `seen_count` says how many there are in all)."""
        with self._tenant_scope(tenant_id) as cur:
            self._get(cur, tenant_id, entry_id)  # must exist in this tenant
            cur.execute(
                SELECT_ENTRIES
                + sql.SQL("merged_into = %s ORDER BY created_at DESC, entry_id LIMIT %s"),
                (tenant_id, entry_id, limit),
            )
            return [MemoryEntry.model_validate(row) for row in cur]

    def _lock_rows(
        self, cur: Cursor, tenant_id: str, entry_ids: list[UUID]
    ) -> dict[UUID, MemoryEntry]:
        """Lock the entries' rows in entry-id order (every writer locks in one order)."""
        cur.execute(
            SELECT_ENTRIES + sql.SQL("entry_id = ANY(%s) ORDER BY entry_id FOR UPDATE"),
            (tenant_id, entry_ids),
        )
        entries = (MemoryEntry.model_validate(row) for row in cur)
        return {entry.entry_id: entry for entry in entries}


def _derived(context: WriteContext, entry_id: UUID) -> WriteContext:
    """The context of an event a write makes on another entry: the same actor, a key of
    its own derived from the write's (a retry of the write finds the write's own key)."""
    base = context.idempotency_key
    suffix = f":rehome:{entry_id}"
    if len(base) + len(suffix) > MAX_IDEMPOTENCY_KEY_CHARS:
        base = "sha256:" + hashlib.sha256(base.encode()).hexdigest()
    return WriteContext(actor=context.actor, idempotency_key=base + suffix)


class RecurrenceReads(RecurrenceWrites):
    """Distances between a query's candidates, for collapsing hits that say one thing;
    recurrences whose canonical entry is no longer served."""

    def orphaned_recurrences(self, tenant_id: str) -> list[UUID]:
        """Entries merged into an entry that is not active (retired, superseded, merged
        away): their lesson is served by nothing. Rehoming on retirement and correction
        keeps this empty; the audit lists what an older write left."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT d.entry_id FROM org_memory_entries d"
                " JOIN org_memory_entries c ON c.tenant_id = d.tenant_id"
                "   AND c.entry_id = d.merged_into"
                " WHERE d.tenant_id = %s AND d.status = 'merged' AND c.status <> 'active'"
                " ORDER BY d.entry_id",
                (tenant_id,),
            )
            return [row["entry_id"] for row in cur]

    def distances_between(
        self, tenant_id: str, entry_ids: list[UUID], embed_rev: str
    ) -> dict[tuple[UUID, UUID], float]:
        """Cosine distance of every pair of the entries with vectors of `embed_rev`
        (keyed both ways); pairs lacking a vector are absent. One self-scoped statement
        (`grandbo_pair_distances`, migration 0024) on a query's autocommit connection."""
        if len(entry_ids) < 2:
            return {}
        try:
            rows = self._tenant_statement(
                tenant_id, _PAIR_DISTANCES, (tenant_id, entry_ids, embed_rev)
            )
        except psycopg.errors.UndefinedFunction:
            # a schema before migration 0024: the same statement in a transaction of its own
            rows = self.distances_in_scope(tenant_id, entry_ids, embed_rev)
        distances: dict[tuple[UUID, UUID], float] = {}
        for row in rows:
            distances[row["a"], row["b"]] = distances[row["b"], row["a"]] = float(row["d"])
        return distances

    def distances_in_scope(
        self, tenant_id: str, entry_ids: list[UUID], embed_rev: str
    ) -> list[dict[str, Any]]:
        """What `grandbo_pair_distances` answers, as a statement in the tenant's scope (the
        reference its test compares it with)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "WITH v AS (SELECT entry_id, embedding FROM org_memory_entries"
                "   WHERE tenant_id = %s AND entry_id = ANY(%s) AND embed_rev = %s)"
                " SELECT a.entry_id AS a, b.entry_id AS b, a.embedding <=> b.embedding AS d"
                " FROM v a JOIN v b ON a.entry_id < b.entry_id",
                (tenant_id, entry_ids, embed_rev),
            )
            return list(cur)
