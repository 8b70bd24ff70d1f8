"""Writes: each command appends its event and updates the projection, the BM25 tag
statistics and the tag postings in one transaction; a repeated idempotency key is a no-op.
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
    EntryNotFoundError,
    RateLimitedError,
    RevisionConflictError,
)
from grandbo.memory.domain.models import (
    DEFAULT_EPISODIC_TTL_DAYS,
    EntryStatus,
    EntryText,
    EventType,
    Feedback,
    FeedbackRate,
    Kind,
    MemoryEntry,
    NewEntry,
    RecurrencesRehomed,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.domain.redacted_text import text_digest
from grandbo.memory.repository.entries import (
    COUNT_EXPIRED,
    ENTRY_BY_ID_FOR_UPDATE,
    INSERT_NEW_ENTRY,
    EntryReads,
    entry_columns,
)
from grandbo.memory.repository.postings import post_tags, unpost_tags
from grandbo.storage.tenant_scope import Cursor, TenantLock, returned_rows

# What else a write of new entries records in its transaction (the learned graph), given
# the cursor and the entries it created (none on a redelivery)
AlsoRecord = Callable[[Cursor, list[MemoryEntry]], None]
# A verdict recorded with a write of entries (an incident's outcome on an entry its
# investigation recalled): the entry, the verdict and who gave it under which key
VerdictWrite = tuple[UUID, Feedback, WriteContext]

LOCK_ENTRIES_IN_ORDER = (
    "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s AND entry_id = ANY(%s)"
    " ORDER BY entry_id FOR UPDATE"
)


class EntryWrites(EntryReads):
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
            self._count_tags(cur, tenant_id, entering=[entry.tags for entry in created.values()])
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
                " service = %s, revision = %s, updated_at = %s,"
                " embedding = NULL, embed_rev = NULL, embedded_revision = NULL,"
                " embedded_at = NULL"
                " WHERE tenant_id = %s AND entry_id = %s",
                (
                    text.title,
                    text.summary,
                    list(tags),
                    text.service,
                    revision,
                    recorded_at,
                    tenant_id,
                    entry_id,
                ),
            )
            self._count_tags(cur, tenant_id, entering=[tags], leaving=[current.tags])
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
            self._count_tags(cur, tenant_id, leaving=[current.tags])
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

    def record_feedback(
        self,
        tenant_id: str,
        entry_id: UUID,
        feedback: Feedback,
        context: WriteContext,
        rate: FeedbackRate | None = None,
    ) -> WriteOutcome:
        """Count a verdict on an entry (of any status: it may have been retired since it
        was served), as an event of the entry's current revision; with `rate`, refused
        (RateLimitedError) past the actor's verdicts per window, a retry excepted."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            current = self._lock_unless_applied(cur, tenant_id, entry_id, context, active=False)
            if isinstance(current, WriteOutcome):
                return current
            if rate is not None:
                self._within_rate(cur, tenant_id, context.actor, rate)
            payload = feedback.model_dump(mode="json")
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, EventType.FEEDBACK, current.revision, payload, context
            )
            if recorded_at is None:
                return self._raced(cur, tenant_id, context)
            counter = sql.Identifier(f"{feedback.verdict.value}_count")
            cur.execute(
                sql.SQL(
                    "UPDATE org_memory_entries SET {counter} = {counter} + 1"
                    " WHERE tenant_id = %s AND entry_id = %s"
                ).format(counter=counter),
                (tenant_id, entry_id),
            )
            return WriteOutcome(entry=self._get(cur, tenant_id, entry_id), applied=True)

    def _record_verdicts(
        self, cur: Cursor, tenant_id: str, verdicts: Sequence[VerdictWrite]
    ) -> None:
        """Verdicts inside another write's transaction, each an event of its entry's
        current revision counted on the entry, as `record_feedback` records one: the
        first for an entry that is not the organization's (another's included) is
        EntryNotFoundError, and nothing of the write stays; a key recorded before is a
        no-op (a redelivery); an entry redacted since takes none (its tombstone holds no
        verdict). A fixed number of statements: the rows locked in entry-id order (as
        every writer locks them), the events in one pipelined `executemany`, the counts in
        one update."""
        if not verdicts:
            return
        cur.execute(
            "SELECT entry_id, revision, status FROM org_memory_entries"
            " WHERE tenant_id = %s AND entry_id = ANY(%s) ORDER BY entry_id FOR UPDATE",
            (tenant_id, sorted({entry_id for entry_id, _, _ in verdicts})),
        )
        found = {row["entry_id"]: row for row in cur.fetchall()}
        for entry_id, _, _ in verdicts:
            if entry_id not in found:
                raise EntryNotFoundError(entry_id)
        kept = [v for v in verdicts if found[v[0]]["status"] != EntryStatus.REDACTED.value]
        if not kept:
            return
        cur.executemany(
            "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
            " actor, idempotency_key) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING"
            " RETURNING entry_id, payload->>'verdict' AS verdict",
            [
                (
                    tenant_id,
                    entry_id,
                    EventType.FEEDBACK.value,
                    found[entry_id]["revision"],
                    Jsonb(feedback.model_dump(mode="json")),
                    context.actor,
                    context.idempotency_key,
                )
                for entry_id, feedback, context in kept
            ],
            returning=True,
        )
        recorded = [(row["entry_id"], row["verdict"]) for row in returned_rows(cur)]
        if not recorded:
            return
        cur.execute(
            "UPDATE org_memory_entries e SET"
            " helpful_count = e.helpful_count + c.helpful,"
            " not_helpful_count = e.not_helpful_count + c.not_helpful,"
            " misleading_count = e.misleading_count + c.misleading"
            " FROM (SELECT id, count(*) FILTER (WHERE v = 'helpful') AS helpful,"
            "   count(*) FILTER (WHERE v = 'not_helpful') AS not_helpful,"
            "   count(*) FILTER (WHERE v = 'misleading') AS misleading"
            "   FROM unnest(%s::uuid[], %s::text[]) AS r(id, v) GROUP BY id) c"
            " WHERE e.tenant_id = %s AND e.entry_id = c.id",
            ([entry_id for entry_id, _ in recorded], [v for _, v in recorded], tenant_id),
        )

    def _within_rate(self, cur: Cursor, tenant_id: str, actor: str, rate: FeedbackRate) -> None:
        """RateLimitedError once `actor` has recorded `rate.limit` verdicts in the last
        `rate.window_s` seconds (a partial index of the feedback events, migration 0018)."""
        cur.execute(
            "SELECT count(*) AS n, ceil(extract(epoch FROM min(recorded_at)"
            "   + make_interval(secs => %(window)s) - clock_timestamp())) AS wait"
            " FROM org_memory_events WHERE tenant_id = %(tenant)s"
            "   AND event_type = 'feedback_recorded' AND actor = %(actor)s"
            "   AND recorded_at > clock_timestamp() - make_interval(secs => %(window)s)",
            {"tenant": tenant_id, "actor": actor, "window": rate.window_s},
        )
        row = cur.fetchone()
        if row is not None and row["n"] >= rate.limit:
            raise RateLimitedError(
                f"{rate.limit} verdicts in {rate.window_s} s is this caller's limit",
                int(row["wait"] or rate.window_s),
            )

    def entries_flagged_misleading(self, tenant_id: str, more_than: int) -> list[MemoryEntry]:
        """Active entries whose current text more than `more_than` distinct callers called
        misleading, worst first (one caller naming many incidents, made up or not, counts
        once): a correction (a new revision) or a retirement clears an entry from the
        list; its lifetime counts stay on it."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT {columns} FROM org_memory_entries e"
                    " CROSS JOIN LATERAL (SELECT count(DISTINCT ev.actor) AS n"
                    "   FROM org_memory_events ev"
                    "   WHERE ev.tenant_id = e.tenant_id AND ev.entry_id = e.entry_id"
                    "     AND ev.event_type = 'feedback_recorded' AND ev.revision = e.revision"
                    "     AND ev.payload->>'verdict' = 'misleading') current"
                    " WHERE e.tenant_id = %s AND e.status = 'active' AND e.misleading_count > %s"
                    "   AND current.n > %s"
                    " ORDER BY current.n DESC, e.entry_id"
                ).format(columns=entry_columns("e")),
                (tenant_id, more_than, more_than),
            )
            return [MemoryEntry.model_validate(row) for row in cur]

    def count_expired(self, tenant_id: str, now: Any) -> int:
        """Active episodic entries past their expiry."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(COUNT_EXPIRED, (tenant_id, now))
            row = cur.fetchone()
            return 0 if row is None else int(row["n"])

    def _append_event(
        self,
        cur: Cursor,
        tenant_id: str,
        entry_id: UUID,
        event_type: EventType,
        revision: int,
        payload: dict[str, Any],
        context: WriteContext,
    ) -> Any:
        cur.execute(
            "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
            " actor, idempotency_key) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING recorded_at",
            (
                tenant_id,
                entry_id,
                event_type.value,
                revision,
                Jsonb(payload),
                context.actor,
                context.idempotency_key,
            ),
        )
        row = cur.fetchone()
        return None if row is None else row["recorded_at"]

    def _already_applied(
        self, cur: Cursor, tenant_id: str, context: WriteContext
    ) -> WriteOutcome | None:
        """The outcome of an earlier write with this idempotency key, if there was one."""
        previous = self._entry_for_key(cur, tenant_id, context.idempotency_key)
        return None if previous is None else WriteOutcome(entry=previous, applied=False)

    def _raced(self, cur: Cursor, tenant_id: str, context: WriteContext) -> WriteOutcome:
        done = self._already_applied(cur, tenant_id, context)
        assert done is not None
        return done

    def _lock_active_unless_applied(
        self, cur: Cursor, tenant_id: str, entry_id: UUID, context: WriteContext
    ) -> MemoryEntry | WriteOutcome:
        return self._lock_unless_applied(cur, tenant_id, entry_id, context, active=True)

    def _lock_unless_applied(
        self,
        cur: Cursor,
        tenant_id: str,
        entry_id: UUID,
        context: WriteContext,
        *,
        active: bool,
    ) -> MemoryEntry | WriteOutcome:
        """The entry (with `active`, only an active one), its row locked until commit; or
        the outcome of an earlier write with this key (a replay), looked for again once the
        lock is held: a concurrent delivery of the same key may have committed while this
        one waited."""
        if (done := self._already_applied(cur, tenant_id, context)) is not None:
            return done
        cur.execute(ENTRY_BY_ID_FOR_UPDATE, (tenant_id, entry_id))
        row = cur.fetchone()
        if row is None:
            raise EntryNotFoundError(entry_id)
        if (done := self._already_applied(cur, tenant_id, context)) is not None:
            return done
        entry = MemoryEntry.model_validate(row)
        if entry.status is EntryStatus.REDACTED or (
            active and entry.status is not EntryStatus.ACTIVE
        ):
            raise EntryNotActiveError(entry_id, entry.status.value)
        return entry

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

    @staticmethod
    def _episodic_ttl_days(cur: Cursor, tenant_id: str) -> int:
        cur.execute(
            "SELECT episodic_ttl_days FROM org_memory_tenant_settings WHERE tenant_id = %s",
            (tenant_id,),
        )
        row = cur.fetchone()
        return DEFAULT_EPISODIC_TTL_DAYS if row is None else int(row["episodic_ttl_days"])

    def set_episodic_ttl_days(self, tenant_id: str, days: int) -> None:
        """How long this organization's new episodic entries are served (from creation)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings (tenant_id, episodic_ttl_days)"
                " VALUES (%s, %s) ON CONFLICT (tenant_id)"
                " DO UPDATE SET episodic_ttl_days = excluded.episodic_ttl_days",
                (tenant_id, days),
            )

    def episodic_ttl_days(self, tenant_id: str) -> int:
        with self._tenant_scope(tenant_id) as cur:
            return self._episodic_ttl_days(cur, tenant_id)

    def promote_entry(self, tenant_id: str, entry_id: UUID, context: WriteContext) -> WriteOutcome:
        """An active episodic entry becomes durable: it no longer expires."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            current = self._lock_active_unless_applied(cur, tenant_id, entry_id, context)
            if isinstance(current, WriteOutcome):
                return current
            if current.kind is Kind.DURABLE:
                return WriteOutcome(entry=current, applied=False)
            recorded_at = self._append_event(
                cur, tenant_id, entry_id, EventType.PROMOTED, current.revision, {}, context
            )
            if recorded_at is None:
                return self._raced(cur, tenant_id, context)
            cur.execute(
                "UPDATE org_memory_entries SET kind = 'durable', expires_at = NULL"
                " WHERE tenant_id = %s AND entry_id = %s",
                (tenant_id, entry_id),
            )
            return WriteOutcome(entry=self._get(cur, tenant_id, entry_id), applied=True)

    def expired_entry_ids(self, tenant_id: str, now: Any, limit: int = 500) -> list[UUID]:
        """Active episodic entries past their expiry, oldest first."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id FROM org_memory_entries WHERE tenant_id = %s"
                " AND status = 'active' AND kind = 'episodic' AND expires_at <= %s"
                " ORDER BY expires_at LIMIT %s",
                (tenant_id, now, limit),
            )
            return [row["entry_id"] for row in cur]

    def _register_tenant(self, cur: Cursor, tenant_id: str) -> None:
        cur.execute(
            "INSERT INTO org_memory_tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING",
            (tenant_id,),
        )
        cur.execute(
            "INSERT INTO org_memory_tenant_stats (tenant_id, active_entries, active_tag_total)"
            " VALUES (%s, 0, 0) ON CONFLICT (tenant_id) DO NOTHING",
            (tenant_id,),
        )

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
        "service": entry.service,
        "origin": entry.origin.value,
        "incident_id": entry.incident_id,
        "kind": entry.kind.value,
        **({"ttl_days": ttl_days} if entry.kind is Kind.EPISODIC else {}),
        **((incident or {}) if entry.incident_id is not None else {}),
    }
