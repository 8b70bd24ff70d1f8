"""Feedback: a caller's verdict on an entry (helpful, not helpful, misleading) appended as
an event and counted on the entry, at most one per caller, entry and incident, within the
caller's rate; the verdicts an incident's outcome records with its entries; an admin's
removal of a verdict (an event of its own, uncounted from the entry); the entries called
misleading more than a threshold (the review list)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from grandbo.errors import (
    EntryNotFoundError,
    InvalidInputError,
    RateLimitedError,
)
from grandbo.memory.domain.models import (
    EntryStatus,
    EventType,
    Feedback,
    FeedbackRate,
    MemoryEntry,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.domain.retrieval_log import RemovedVerdict, VerdictRemoval
from grandbo.memory.repository.entries import (
    entry_columns,
)
from grandbo.memory.repository.events import EventWrites
from grandbo.storage.tenant_scope import Cursor, TenantLock, returned_rows

# A verdict recorded with a write of entries (an incident's outcome on an entry its
# investigation recalled): the entry, the verdict and who gave it under which key
VerdictWrite = tuple[UUID, Feedback, WriteContext]


class FeedbackWrites(EventWrites):
    """Verdicts on entries."""

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

    def remove_verdict(
        self, tenant_id: str, verdict_id: int, reason: str, context: WriteContext
    ) -> RemovedVerdict | None:
        """An admin's removal of a verdict: a `feedback_removed` event on its entry (who,
        when, why; the verdict named by its key), the verdict uncounted from the entry, in
        one transaction under the entry's lock. A verdict removed before (by this key or
        another) is answered as it was removed, `applied` false. None where the
        organization holds no verdict of that id (another organization's included); an
        entry redacted since holds no verdict to remove (EntryNotActiveError)."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            cur.execute(
                "SELECT entry_id, actor, idempotency_key, payload->>'verdict' AS verdict,"
                " payload->>'incident_id' AS incident_id FROM org_memory_events"
                " WHERE tenant_id = %s AND event_id = %s AND event_type = 'feedback_recorded'",
                (tenant_id, verdict_id),
            )
            verdict = cur.fetchone()
            if verdict is None:
                return None
            current = self._lock_unless_applied(
                cur, tenant_id, verdict["entry_id"], context, active=False
            )
            applied = False
            removal = self._removal_of(cur, tenant_id, verdict["idempotency_key"])
            if removal is None and isinstance(current, MemoryEntry):
                payload = {
                    "verdict_key": verdict["idempotency_key"],
                    "verdict": verdict["verdict"],
                    "reason": reason,
                }
                recorded_at = self._append_event(
                    cur,
                    tenant_id,
                    verdict["entry_id"],
                    EventType.FEEDBACK_REMOVED,
                    current.revision,
                    payload,
                    context,
                )
                if recorded_at is not None:
                    counter = sql.Identifier(f"{verdict['verdict']}_count")
                    cur.execute(
                        sql.SQL(
                            "UPDATE org_memory_entries SET {counter} = {counter} - 1"
                            " WHERE tenant_id = %s AND entry_id = %s"
                        ).format(counter=counter),
                        (tenant_id, verdict["entry_id"]),
                    )
                    applied = True
                    removal = VerdictRemoval(
                        actor=context.actor, removed_at=recorded_at, reason=reason
                    )
                else:  # this key was spent meanwhile: whatever it removed stands
                    removal = self._removal_of(cur, tenant_id, verdict["idempotency_key"])
            if removal is None:  # the key was spent on another write
                raise InvalidInputError(
                    "Idempotency-Key", "was used for another write: send a new one"
                )
            return RemovedVerdict(
                verdict_id=verdict_id,
                entry_id=verdict["entry_id"],
                verdict=verdict["verdict"],
                actor=verdict["actor"],
                incident_id=verdict["incident_id"],
                removal=removal,
                applied=applied,
            )

    @staticmethod
    def _removal_of(cur: Cursor, tenant_id: str, verdict_key: str) -> VerdictRemoval | None:
        cur.execute(
            "SELECT actor, recorded_at, payload->>'reason' AS reason FROM org_memory_events"
            " WHERE tenant_id = %s AND event_type = 'feedback_removed'"
            "   AND payload->>'verdict_key' = %s ORDER BY event_id LIMIT 1",
            (tenant_id, verdict_key),
        )
        row = cur.fetchone()
        return (
            None
            if row is None
            else VerdictRemoval(
                actor=row["actor"], removed_at=row["recorded_at"], reason=row["reason"] or ""
            )
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
        once; a verdict an admin removed, not at all): a correction (a new revision) or a
        retirement clears an entry from the list; its lifetime counts stay on it."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT {columns} FROM org_memory_entries e"
                    " CROSS JOIN LATERAL (SELECT count(DISTINCT ev.actor) AS n"
                    "   FROM org_memory_events ev"
                    "   WHERE ev.tenant_id = e.tenant_id AND ev.entry_id = e.entry_id"
                    "     AND ev.event_type = 'feedback_recorded' AND ev.revision = e.revision"
                    "     AND ev.payload->>'verdict' = 'misleading'"
                    "     AND NOT EXISTS (SELECT 1 FROM org_memory_events x"
                    "       WHERE x.tenant_id = ev.tenant_id AND x.event_type = 'feedback_removed'"
                    "         AND x.payload->>'verdict_key' = ev.idempotency_key)) current"
                    " WHERE e.tenant_id = %s AND e.status = 'active' AND e.misleading_count > %s"
                    "   AND current.n > %s"
                    " ORDER BY current.n DESC, e.entry_id"
                ).format(columns=entry_columns("e")),
                (tenant_id, more_than, more_than),
            )
            return [MemoryEntry.model_validate(row) for row in cur]
