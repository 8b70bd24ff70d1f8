"""Writes of entries: create, correct, retire. Each command appends its event and updates
the projection, the BM25 tag statistics and the tag postings in one transaction; a repeated
idempotency key is a no-op (`events`). Verdicts are `feedback`'s, the episodic lifetime
`episodic`'s; `EntryWrites` is all of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from psycopg import sql
from psycopg.types.json import Jsonb

from grandbo.errors import (
    EntryNotActiveError,
    RevisionConflictError,
)
from grandbo.memory.domain.models import (
    DEFAULT_EPISODIC_TTL_DAYS,
    EntryStatus,
    EntryText,
    EventType,
    Kind,
    MemoryEntry,
    NewEntry,
    RecurrencesRehomed,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.domain.redacted_text import text_digest
from grandbo.memory.repository.entries import (
    INSERT_NEW_ENTRY,
    entry_columns,
)
from grandbo.memory.repository.episodic import EpisodicWrites
from grandbo.memory.repository.feedback import FeedbackWrites, VerdictWrite
from grandbo.memory.repository.postings import post_tags, unpost_tags
from grandbo.storage.tenant_scope import Cursor, TenantLock, returned_rows

# What else a write of new entries records in its transaction (the learned graph), given
# the cursor and the entries it created (none on a redelivery)
AlsoRecord = Callable[[Cursor, list[MemoryEntry]], None]

LOCK_ENTRIES_IN_ORDER = (
    "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s AND entry_id = ANY(%s)"
    " ORDER BY entry_id FOR UPDATE"
)


class EntryWrites(FeedbackWrites, EpisodicWrites):
    """Create, correct and retire entries (event + projection, one transaction)."""

    def create_entry(
        self,
        tenant_id: str,
        entry: NewEntry,
        tags: Sequence[str],
        context: WriteContext,
        *,
        also: AlsoRecord | None = None,
    ) -> WriteOutcome:
        """Record `entry_created` and project it, in one transaction; a repeated key is a no-op."""
        return self.create_entries(tenant_id, [(entry, tags, context)], also=also)[0]

    def create_entries(
        self,
        tenant_id: str,
        items: Sequence[tuple[NewEntry, Sequence[str], WriteContext]],
        *,
        also: AlsoRecord | None = None,
        incident_services: Collection[str] = (),
        incident_at: datetime | None = None,
        verdicts: Sequence[VerdictWrite] = (),
    ) -> list[WriteOutcome]:
        """Several entries (an incident's findings) in one transaction: all or none.

        A fixed number of statements whatever the batch size: earlier keys in one
        lookup, events and entries each in one pipelined `executemany`, tag statistics
        and postings each in one statement. A key seen before (earlier, twice in the
        batch, or written concurrently) yields the entry it created, `applied=False`.
        An entry of an incident records in its event the incident's own services and
        moment (`incident_services`, `incident_at`): what the learned graph drew from
        them is rebuilt from the events alone (`grandbo rebuild`, an import). `verdicts`
        are recorded in the same transaction (`_record_verdicts`).
        """
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            self._register_tenant(cur, tenant_id)
            ttl_days, redactions = self._creation_settings(cur, tenant_id)
            keys = [context.idempotency_key for _, _, context in items]
            known = self._entries_for_keys(cur, tenant_id, keys)
            fresh: dict[str, tuple[UUID, NewEntry, list[str], WriteContext]] = {}
            for entry, tags, context in items:
                key = context.idempotency_key
                if key not in known and key not in fresh:
                    fresh[key] = (uuid4(), entry, list(tags), context)
            incident = {
                **(
                    {"incident_services": sorted(set(incident_services))}
                    if incident_services
                    else {}
                ),
                **({"incident_at": incident_at.isoformat()} if incident_at else {}),
            }
            # a creation that is a redacted one again (a redelivery of its incident, whose
            # key the redaction removed) writes nothing: the tombstone answers for it
            redacted = (
                self._redacted_again(cur, tenant_id, fresh, ttl_days, incident)
                if redactions
                else {}
            )
            for key in redacted:
                del fresh[key]
            known |= redacted
            recorded = self._append_created_events(
                cur, tenant_id, list(fresh.values()), ttl_days, incident=incident
            )
            created = self._insert_entries(
                cur,
                tenant_id,
                [(*item, recorded[key]) for key, item in fresh.items() if key in recorded],
                ttl_days,
            )
            self._count_tags(
                cur, tenant_id, entering=[entry.index_tags for entry in created.values()]
            )
            post_tags(cur, tenant_id, list(created.values()))
            # the entries' rows are locked before the learned graph's, as a redaction
            # locks them (one order: no deadlock between the two)
            self._record_verdicts(cur, tenant_id, verdicts)
            if also is not None:
                also(cur, list(created.values()))
            raced = [key for key in fresh if key not in recorded]
            if raced:  # concurrent deliveries of the same keys won the race
                known |= self._entries_for_keys(cur, tenant_id, raced)
            outcomes, reported = [], set()
            for key in keys:
                if key in recorded and key not in reported:
                    outcomes.append(WriteOutcome(entry=created[fresh[key][0]], applied=True))
                    reported.add(key)
                else:
                    previous = known.get(key) or created[fresh[key][0]]
                    outcomes.append(WriteOutcome(entry=previous, applied=False))
            return outcomes

    def _append_created_events(
        self,
        cur: Cursor,
        tenant_id: str,
        fresh: Sequence[tuple[UUID, NewEntry, list[str], WriteContext]],
        ttl_days: int,
        *,
        incident: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`entry_created` events, in order; the keys that went in, with their timestamps
        (the payloads: `_created_payload`)."""
        if not fresh:
            return {}
        cur.executemany(
            "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
            " actor, idempotency_key) VALUES (%s, %s, %s, 1, %s, %s, %s)"
            " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING"
            " RETURNING idempotency_key, recorded_at",
            [
                (
                    tenant_id,
                    entry_id,
                    EventType.CREATED.value,
                    Jsonb(_created_payload(entry, tags, ttl_days, incident)),
                    context.actor,
                    context.idempotency_key,
                )
                for entry_id, entry, tags, context in fresh
            ],
            returning=True,
        )
        return {row["idempotency_key"]: row["recorded_at"] for row in returned_rows(cur)}

    def _redacted_again(
        self,
        cur: Cursor,
        tenant_id: str,
        fresh: dict[str, tuple[UUID, NewEntry, list[str], WriteContext]],
        ttl_days: int,
        incident: dict[str, Any],
    ) -> dict[str, MemoryEntry]:
        """The fresh creations that are a redacted text again, with the tombstone each
        would be: its text is one a tombstone's redaction removed (the digests it keeps,
        `grandbo.memory.domain.redacted_text`), or its whole payload is one a redaction removed
        (tombstones from before those digests, migration 0019's payload digest). Only a
        tombstone of the projection answers (not an import's events still being replayed).
        One statement, on the partial indexes of migration 0030."""
        if not fresh:
            return {}
        keys = list(fresh)
        cur.execute(
            sql.SQL(
                "WITH asked AS MATERIALIZED ("
                "  SELECT i, text_sha256,"
                "    encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') AS payload_sha256"
                "  FROM unnest(%s::text[], %s::jsonb[])"
                "    WITH ORDINALITY AS a(text_sha256, payload, i)),"
                # the tenant's redactions, read once (few: a partial index of them only)
                " redactions AS MATERIALIZED ("
                "  SELECT entry_id, payload->'text_sha256' AS texts FROM org_memory_events"
                "  WHERE tenant_id = %s AND event_type = 'entry_redacted'),"
                " matched AS MATERIALIZED ("
                "  SELECT asked.i, r.entry_id FROM asked JOIN redactions r"
                "    ON r.texts ? asked.text_sha256"
                "  UNION ALL"
                "  SELECT asked.i, ev.entry_id FROM asked JOIN org_memory_events ev"
                "    ON ev.tenant_id = %s AND ev.payload ? 'redacted'"
                "   AND ev.payload->>'sha256' = asked.payload_sha256"
                "   AND ev.event_type = 'entry_created')"
                " SELECT DISTINCT ON (matched.i) matched.i, {} FROM matched"
                " JOIN org_memory_entries e ON e.tenant_id = %s"
                "  AND e.entry_id = matched.entry_id AND e.status = 'redacted'"
                " ORDER BY matched.i, e.entry_id"
            ).format(entry_columns("e")),
            (
                [text_digest(entry.title, entry.summary) for _, entry, _, _ in fresh.values()],
                [
                    Jsonb(_created_payload(entry, tags, ttl_days, incident))
                    for _, entry, tags, _ in fresh.values()
                ],
                tenant_id,
                tenant_id,
                tenant_id,
            ),
        )
        found = {}
        for row in cur:
            found[keys[row.pop("i") - 1]] = MemoryEntry.model_validate(row)
        return found

    def _insert_entries(
        self,
        cur: Cursor,
        tenant_id: str,
        rows: Sequence[tuple[UUID, NewEntry, list[str], WriteContext, Any]],
        ttl_days: int,
    ) -> dict[UUID, MemoryEntry]:
        if not rows:
            return {}
        cur.executemany(
            INSERT_NEW_ENTRY,
            [
                (
                    tenant_id,
                    entry_id,
                    entry.title,
                    entry.summary,
                    tags,
                    entry.tags,
                    entry.service,
                    entry.origin.value,
                    entry.incident_id,
                    recorded_at,
                    recorded_at,
                    entry.kind.value,
                    recorded_at + timedelta(days=ttl_days) if entry.kind is Kind.EPISODIC else None,
                )
                for entry_id, entry, tags, _, recorded_at in rows
            ],
            returning=True,
        )
        entries = (MemoryEntry.model_validate(row) for row in returned_rows(cur))
        return {entry.entry_id: entry for entry in entries}

    def correct_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        text: EntryText,
        tags: Sequence[str],
        context: WriteContext,
        expected_revision: int | None = None,
    ) -> WriteOutcome:
        """A new revision of an active entry's text; its old vector stops being served."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            current = self._lock_active_unless_applied(cur, tenant_id, entry_id, context)
            if isinstance(current, WriteOutcome):
                return current
            if expected_revision is not None and expected_revision != current.revision:
                raise RevisionConflictError(entry_id, expected_revision, current.revision)
            revision = current.revision + 1
            payload = {
                "title": text.title,
                "summary": text.summary,
                "tags": list(tags),
                "given_tags": text.tags,
                "service": text.service,
            }
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, EventType.CORRECTED, revision, payload, context
            )
            if recorded_at is None:  # a concurrent delivery of the same key won the race
                return self._raced(cur, tenant_id, context)
            cur.execute(
                # the origin stays (an incident's lesson corrected is still one: its
                # revision says it was corrected)
                "UPDATE org_memory_entries SET title = %s, summary = %s, tags = %s,"
                " given_tags = %s, service = %s, revision = %s, updated_at = %s,"
                " embedding = NULL, embed_rev = NULL, embedded_revision = NULL,"
                " embedded_at = NULL"
                " WHERE tenant_id = %s AND entry_id = %s",
                (
                    text.title,
                    text.summary,
                    list(tags),
                    text.tags,
                    text.service,
                    revision,
                    recorded_at,
                    tenant_id,
                    entry_id,
                ),
            )
            self._count_tags(cur, tenant_id, entering=[tags], leaving=[current.index_tags])
            corrected = self._get(cur, tenant_id, entry_id)
            unpost_tags(cur, tenant_id, entry_id)
            post_tags(cur, tenant_id, [corrected])
            rehomed = None
            if (text.title, text.summary) != (current.title, current.summary):
                # its recurrences whose words no longer agree with the new text said the
                # old lesson, which lives on in them (grandbo.memory.repository.recurrences)
                rehomed = self._rehome_recurrences(
                    cur, tenant_id, entry_id, None, context, still_agreeing=corrected
                )
            if rehomed is not None:
                corrected = self._get(cur, tenant_id, entry_id)
            return WriteOutcome(entry=corrected, applied=True, recurrences=rehomed)

    def retire_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        reason: str,
        context: WriteContext,
        superseded_by: UUID | None = None,
        *,
        expired_by: Any = None,
    ) -> WriteOutcome:
        """Take an active entry out of retrieval (retired, or superseded by another entry).

        With `expired_by` (the sweeper), only if it is still an episodic entry expired by
        then once its row is locked: one promoted meanwhile stays (applied=False)."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            if superseded_by is not None:
                # both rows locked, in entry-id order as every writer locks: a successor
                # retired meanwhile is seen as retired here, never handed the lesson after
                # its own retirement rehomed its recurrences
                cur.execute(LOCK_ENTRIES_IN_ORDER, (tenant_id, [entry_id, superseded_by]))
            current = self._lock_active_unless_applied(cur, tenant_id, entry_id, context)
            if isinstance(current, WriteOutcome):
                return current
            if expired_by is not None and (
                current.expires_at is None or current.expires_at > expired_by
            ):
                return WriteOutcome(entry=current, applied=False)
            if superseded_by is not None:
                # must exist in this tenant and be served: a lesson is never handed to an
                # entry that is itself retired, superseded or merged away
                successor = self._get(cur, tenant_id, superseded_by)
                if successor.status is not EntryStatus.ACTIVE or superseded_by == entry_id:
                    raise EntryNotActiveError(
                        superseded_by,
                        f"{successor.status.value}: it cannot supersede {entry_id}",
                    )
                event_type, status = EventType.SUPERSEDED, EntryStatus.SUPERSEDED
            else:
                event_type, status = EventType.RETIRED, EntryStatus.RETIRED
            payload = {
                "reason": reason,
                "superseded_by": None if superseded_by is None else str(superseded_by),
            }
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, event_type, current.revision, payload, context
            )
            if recorded_at is None:  # a concurrent delivery of the same key won the race
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET status = %s, superseded_by = %s, updated_at = %s"
                " WHERE tenant_id = %s AND entry_id = %s",
                (status.value, superseded_by, recorded_at, tenant_id, entry_id),
            )
            self._count_tags(cur, tenant_id, leaving=[current.index_tags])
            unpost_tags(cur, tenant_id, entry_id)
            rehomed = self._rehome_recurrences(cur, tenant_id, entry_id, superseded_by, context)
            return WriteOutcome(
                entry=self._get(cur, tenant_id, entry_id), applied=True, recurrences=rehomed
            )

    def _rehome_recurrences(
        self,
        cur: Cursor,
        tenant_id: str,
        entry_id: UUID,
        successor: UUID | None,
        context: WriteContext,
        still_agreeing: MemoryEntry | None = None,
    ) -> RecurrencesRehomed | None:
        """Where the entries merged into `entry_id` go when it stops saying their lesson
        (RecurrenceWrites moves them; entries without recurrences have none to move)."""
        return None

    @staticmethod
    def _creation_settings(cur: Cursor, tenant_id: str) -> tuple[int, bool]:
        """The organization's episodic lifetime, and whether it has any tombstone (one
        statement: most organizations have none, and their creations skip the check
        that a text is a redacted one again)."""
        cur.execute(
            "SELECT (SELECT episodic_ttl_days FROM org_memory_tenant_settings"
            "        WHERE tenant_id = %s) AS ttl_days,"
            " EXISTS (SELECT 1 FROM org_memory_events WHERE tenant_id = %s"
            "         AND event_type = 'entry_redacted') AS redactions",
            (tenant_id, tenant_id),
        )
        row = cur.fetchone()
        assert row is not None
        ttl = DEFAULT_EPISODIC_TTL_DAYS if row["ttl_days"] is None else int(row["ttl_days"])
        return ttl, bool(row["redactions"])

    def _count_tags(
        self,
        cur: Cursor,
        tenant_id: str,
        entering: Sequence[Sequence[str]] = (),
        leaving: Sequence[Sequence[str]] = (),
    ) -> None:
        """Keep BM25 statistics current: tag document frequencies and the tenant's totals.

        `entering` are the tag sets of entries joining the active set, `leaving` those of
        entries leaving it (a correction is both). The net change per tag goes in one
        statement that locks tags in one order, then the tenant's totals: every writer
        takes the same locks in the same order, so concurrent writers cannot deadlock.
        """
        change: Counter[str] = Counter()
        for tags in entering:
            change.update(set(tags))
        for tags in leaving:
            change.subtract(set(tags))
        tags = sorted(tag for tag, n in change.items() if n)
        deltas = [change[tag] for tag in tags]
        if tags and min(deltas) > 0:  # entries created: one ordered upsert
            cur.execute(
                "INSERT INTO org_memory_tag_stats (tenant_id, tag, doc_count)"
                " SELECT %s, tag, n FROM unnest(%s::text[], %s::int[]) AS s(tag, n) ORDER BY tag"
                " ON CONFLICT (tenant_id, tag)"
                " DO UPDATE SET doc_count = org_memory_tag_stats.doc_count + EXCLUDED.doc_count",
                (tenant_id, tags, deltas),
            )
        elif tags:
            # Some counts go down, and a proposed row with a negative count fails the CHECK
            # before ON CONFLICT can add it up: create missing tags at 0, lock every row in
            # tag order, then apply the changes.
            cur.execute(
                "INSERT INTO org_memory_tag_stats (tenant_id, tag, doc_count)"
                " SELECT %s, tag, 0 FROM unnest(%s::text[]) AS s(tag) ORDER BY tag"
                " ON CONFLICT (tenant_id, tag) DO NOTHING",
                (tenant_id, [tag for tag, n in zip(tags, deltas, strict=True) if n > 0]),
            )
            cur.execute(
                "SELECT 1 FROM org_memory_tag_stats WHERE tenant_id = %s AND tag = ANY(%s)"
                " ORDER BY tag FOR UPDATE",
                (tenant_id, tags),
            )
            cur.execute(
                "UPDATE org_memory_tag_stats t SET doc_count = t.doc_count + s.n"
                " FROM unnest(%s::text[], %s::int[]) AS s(tag, n)"
                " WHERE t.tenant_id = %s AND t.tag = s.tag",
                (tags, deltas, tenant_id),
            )
        entries = len(entering) - len(leaving)
        tag_total = sum(len(set(tags)) for tags in entering) - sum(
            len(set(tags)) for tags in leaving
        )
        if entries or tag_total:
            cur.execute(
                "UPDATE org_memory_tenant_stats SET active_entries = active_entries + %s,"
                " active_tag_total = active_tag_total + %s WHERE tenant_id = %s",
                (entries, tag_total, tenant_id),
            )


def _created_payload(
    entry: NewEntry, tags: Sequence[str], ttl_days: int, incident: dict[str, Any] | None
) -> dict[str, Any]:
    """An `entry_created` event's payload. An episodic entry's carries its lifetime, so a
    replay finds its expiry; an incident's, `incident` (its incident's services and
    moment)."""
    return {
        "title": entry.title,
        "summary": entry.summary,
        "tags": list(tags),
        "given_tags": entry.tags,
        "service": entry.service,
        "origin": entry.origin.value,
        "incident_id": entry.incident_id,
        "kind": entry.kind.value,
        **({"ttl_days": ttl_days} if entry.kind is Kind.EPISODIC else {}),
        **((incident or {}) if entry.incident_id is not None else {}),
    }
