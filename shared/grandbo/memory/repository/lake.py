"""The event log read out in event-id order, and written back into another store: what
moving an organization's lake needs (`grandbo.memory.lifecycle.lake`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from grandbo.errors import InvalidInputError, StoreUnavailableError
from grandbo.memory.domain.lake_stream import LakeEvent
from grandbo.memory.domain.models import EntryStatus, EventType
from grandbo.memory.domain.projection import UnreplayableEventError, replay
from grandbo.memory.domain.redacted_text import text_digest
from grandbo.memory.repository.rebuild import stored_events
from grandbo.storage.tenant_scope import (
    Cursor,
    Isolation,
    TenantLock,
    TenantScopedRepository,
    returned_rows,
)

_EVENT_COLUMNS = (
    "SELECT event_id, entry_id, event_type, revision, payload, actor, idempotency_key,"
    " recorded_at FROM org_memory_events"
)
# the rows read at a time while every event of a tenant goes by
_FOLD_PAGE = 2_000


def _lake_event(row: dict[str, Any]) -> LakeEvent:
    return LakeEvent.model_validate({k: v for k, v in row.items() if k != "event_id"})


@dataclass(frozen=True, slots=True)
class ImportedBatch:
    inserted: int
    present: int  # already held, identical (an earlier import of the same stream)


class LakeStore(TenantScopedRepository):
    """Read a tenant's events in pages; insert a stream's events, idempotently."""

    def event_horizon(self, tenant_id: str) -> int:
        """The last event id of the tenant once no write of it is in flight (its lock
        taken alone for the moment): every event up to it is committed, every later one
        gets a higher id, so an export up to it is one consistent log."""
        with self._tenant_scope(tenant_id, lock=TenantLock.EXCLUSIVE) as cur:
            cur.execute(
                "SELECT coalesce(max(event_id), 0) AS upto FROM org_memory_events"
                " WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["upto"])

    def event_page(
        self, tenant_id: str, after: int, upto: int, limit: int
    ) -> list[tuple[int, LakeEvent]]:
        """At most `limit` events with ids in (after, upto], in order, with their ids."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                _EVENT_COLUMNS + " WHERE tenant_id = %s AND event_id > %s AND event_id <= %s"
                " ORDER BY event_id LIMIT %s",
                (tenant_id, after, upto, limit),
            )
            return [(row["event_id"], _lake_event(row)) for row in cur.fetchall()]

    def fold_events(self, tenant_id: str, upto: int, visit: Callable[[LakeEvent], object]) -> None:
        """Every event up to `upto`, in order, through `visit`, from one snapshot."""
        with self._tenant_scope(tenant_id, isolation=Isolation.SNAPSHOT) as cur:
            after = 0
            while True:
                cur.execute(
                    _EVENT_COLUMNS + " WHERE tenant_id = %s AND event_id > %s AND event_id <= %s"
                    " ORDER BY event_id LIMIT %s",
                    (tenant_id, after, upto, _FOLD_PAGE),
                )
                rows = cur.fetchall()
                for row in rows:
                    visit(_lake_event(row))
                if len(rows) < _FOLD_PAGE:
                    return
                after = rows[-1]["event_id"]

    def import_events(
        self,
        tenant_id: str,
        events: Sequence[LakeEvent],
        *,
        offset: int,
        first: bool,
        merge: bool,
        last: bool = True,
    ) -> ImportedBatch:
        """Insert a batch of a stream's events as they are (payloads, keys and times kept;
        a redacted payload stays redacted), under the tenant's write lock, in one
        transaction. A key the tenant already holds is skipped if its event is the same,
        refused if not; nothing of a refused batch is stored. The `first` batch of a
        stream is refused where the organization has memory not from this stream, unless
        `merge`. The events are marked imported (history, never fit: migration 0033); on
        a schema before it, StoreUnavailableError (a 503 that says to migrate)."""
        try:
            return self._import_events(
                tenant_id, events, offset=offset, first=first, merge=merge, last=last
            )
        except psycopg.errors.UndefinedColumn:
            raise StoreUnavailableError(
                "the database predates migration 0033 (imported events are marked): run "
                "the migrations, then import again"
            ) from None

    def _import_events(
        self,
        tenant_id: str,
        events: Sequence[LakeEvent],
        *,
        offset: int,
        first: bool,
        merge: bool,
        last: bool,
    ) -> ImportedBatch:
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            keys = [event.idempotency_key for event in events]
            if first and not merge:
                self._refuse_foreign_memory(cur, tenant_id, keys[0], events)
            cur.execute(
                "INSERT INTO org_memory_tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING",
                (tenant_id,),
            )
            cur.executemany(
                # `imported`: what a stream claims is history, never what the
                # organization's recalibration is fit from (migration 0033)
                "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision,"
                " payload, actor, idempotency_key, recorded_at, imported)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, true)"
                " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING"
                " RETURNING idempotency_key, event_id",
                [
                    (
                        tenant_id,
                        e.entry_id,
                        e.event_type.value,
                        e.revision,
                        Jsonb(e.payload),
                        e.actor,
                        e.idempotency_key,
                        e.recorded_at,
                    )
                    for e in events
                ],
                returning=True,
            )
            returned = {row["idempotency_key"]: row["event_id"] for row in returned_rows(cur)}
            inserted = set(returned)
            held = [i for i, key in enumerate(keys) if key not in inserted]
            if held:
                self._refuse_different(cur, tenant_id, events, held, offset)
            self._refuse_orphans(cur, tenant_id, events, offset)
            self._refuse_unmatched_removals(cur, tenant_id, events, returned, offset)
            self._refuse_resurrection(cur, tenant_id, events, offset)
            self._refuse_redacted_text(cur, tenant_id, events, returned, offset)
            if inserted or last:
                self._refuse_unreplayable(
                    cur, tenant_id, offset, set(returned.values()), whole=last
                )
            return ImportedBatch(inserted=len(inserted), present=len(held))

    def _refuse_resurrection(
        self, cur: Cursor, tenant_id: str, events: Sequence[LakeEvent], offset: int
    ) -> None:
        """A tombstone is final: an entry redacted in the organization (or by this batch)
        has no event holding text, and one redaction. Before, the pre-redaction export's
        events under new keys, merged in, made the entry active again with its text."""
        cur.execute(
            "SELECT ev.entry_id, ev.idempotency_key FROM org_memory_events ev"
            " WHERE ev.tenant_id = %s AND ev.entry_id = ANY(%s)"
            "   AND EXISTS (SELECT 1 FROM org_memory_events r"
            "     WHERE r.tenant_id = ev.tenant_id AND r.entry_id = ev.entry_id"
            "       AND r.event_type = 'entry_redacted' AND r.event_id <> ev.event_id)"
            "   AND (ev.event_type = 'entry_redacted' OR NOT (ev.payload ? 'redacted'))"
            " ORDER BY ev.event_id LIMIT 1",
            (tenant_id, sorted({e.entry_id for e in events})),
        )
        row = cur.fetchone()
        if row is None:
            return
        keys = [e.idempotency_key for e in events]
        index = keys.index(row["idempotency_key"]) if row["idempotency_key"] in keys else 0
        raise InvalidInputError(
            f"events.{offset + index}",
            f"entry {row['entry_id']} is redacted: a tombstone is final, and no event "
            "brings its text or another redaction back (one redacted in the stream but "
            "holding its text here, from an import before its redaction: `grandbo redact` "
            "it here, after `grandbo rebuild` if an unfinished import left it unlisted, "
            "then import again); nothing of the batch was stored",
        )

    def _refuse_redacted_text(
        self,
        cur: Cursor,
        tenant_id: str,
        events: Sequence[LakeEvent],
        inserted: dict[str, int],
        offset: int,
    ) -> None:
        """No text a redaction removed comes back under another entry id: an event of the
        batch holding a text whose digest a redaction recorded before it in the log (an
        export made before the redaction, its ids and keys renewed) is refused, as the
        write path refuses the same text (`EntryWrites._redacted_again`). A text stored
        before the redaction (another entry saying the same, in the source too) stays."""
        asked: dict[str, list[int]] = {}
        for index, event in enumerate(events):
            title, summary = event.payload.get("title"), event.payload.get("summary")
            if (
                event.idempotency_key in inserted
                and event.event_type in (EventType.CREATED, EventType.CORRECTED)
                and isinstance(title, str)
                and isinstance(summary, str)
            ):
                asked.setdefault(text_digest(title, summary), []).append(index)
        if not asked:
            return
        cur.execute(
            "SELECT ev.event_id, ev.entry_id, d.digest FROM org_memory_events ev,"
            " jsonb_array_elements_text(ev.payload->'text_sha256') AS d(digest)"
            " WHERE ev.tenant_id = %s AND ev.event_type = 'entry_redacted'"
            "   AND ev.payload->'text_sha256' ?| %s",
            (tenant_id, list(asked)),
        )
        for row in cur.fetchall():
            for index in asked.get(row["digest"], []):
                if inserted[events[index].idempotency_key] > row["event_id"]:
                    raise InvalidInputError(
                        f"events.{offset + index}.payload",
                        f"holds the text entry {row['entry_id']} held until it was redacted: "
                        "a redacted text does not come back under another id; nothing of "
                        "the batch was stored",
                    )

    def _refuse_unreplayable(
        self, cur: Cursor, tenant_id: str, offset: int, batch: set[int], *, whole: bool
    ) -> None:
        """The organization's whole log, this batch included, must fold into a projection
        (`grandbo.memory.domain.projection`), and once the stream is `whole` (its last batch),
        every tombstone be backed by its redaction and every recurrence merged into an
        entry of the log (a redaction's event may come in a later batch than the payloads
        it rewrote); else the batch is refused and nothing of it stays (a log that cannot
        be replayed could never be repaired: it is append-only). An event the organization
        already held that cannot be replayed (an earlier version's import stored it) is
        left out, as a health check leaves it out: only the batch's own are refused."""
        events = stored_events(cur, tenant_id)

        def refuse(problem: UnreplayableEventError) -> None:
            if problem.event.event_id in batch:
                raise InvalidInputError(
                    "events",
                    f"the stream from event {offset} on cannot be replayed ({problem}); "
                    "nothing of the batch was stored",
                ) from problem

        state = replay(events, on_unreplayable=refuse)
        if not whole:
            return
        redacted = {e.entry_id for e in events if e.event_type is EventType.REDACTED}
        for entry in state.values():
            if entry.status is EntryStatus.REDACTED and entry.entry_id not in redacted:
                raise InvalidInputError(
                    "events", f"entry {entry.entry_id} is redacted without its redaction event"
                )
            if entry.merged_into is not None and entry.merged_into not in state:
                raise InvalidInputError(
                    "events", f"entry {entry.entry_id} is merged into an entry of no event"
                )
            if (
                entry.status is EntryStatus.MERGED
                and entry.merged_into is not None
                and state[entry.merged_into].status is EntryStatus.REDACTED
            ):
                # a redaction redacts or rehomes the recurrences of its entry: no write
                # leaves one merged into a tombstone, served by nothing
                raise InvalidInputError(
                    "events",
                    f"entry {entry.entry_id} is a recurrence of {entry.merged_into}, which "
                    f"is {state[entry.merged_into].status.value}",
                )

    def _refuse_foreign_memory(
        self, cur: Cursor, tenant_id: str, first_key: str, events: Sequence[LakeEvent]
    ) -> None:
        cur.execute(
            "SELECT count(*) AS n, bool_or(idempotency_key = %s) AS ours,"
            " bool_or(entry_id = ANY(%s)) AS shared"
            " FROM org_memory_events WHERE tenant_id = %s",
            (first_key, sorted({e.entry_id for e in events}), tenant_id),
        )
        row = cur.fetchone()
        if row is not None and row["n"] and not row["ours"] and row["shared"]:
            raise InvalidInputError(
                "events",
                f"organization {tenant_id} holds entries of this stream under other keys: an "
                "entry redacted in one store since an earlier import (a redaction leaves new "
                "keys) is redacted again in the other with `grandbo redact`, then imported",
            )
        if row is not None and row["n"] and not row["ours"]:
            raise InvalidInputError(
                "merge",
                f"organization {tenant_id} already has memory of its own ({row['n']} events "
                "not from this stream): import into an empty organization, or merge into it",
            )

    def _refuse_different(
        self,
        cur: Cursor,
        tenant_id: str,
        events: Sequence[LakeEvent],
        held: Sequence[int],
        offset: int,
    ) -> None:
        cur.execute(
            _EVENT_COLUMNS + " WHERE tenant_id = %s AND idempotency_key = ANY(%s)",
            (tenant_id, [events[i].idempotency_key for i in held]),
        )
        stored = {row["idempotency_key"]: _lake_event(row) for row in cur.fetchall()}
        for i in held:
            if stored.get(events[i].idempotency_key) != events[i]:
                raise InvalidInputError(
                    "events",
                    f"event {offset + i}: the organization holds another event under its "
                    "idempotency key (an entry redacted here or there since an earlier "
                    "import is redacted again in the other store with `grandbo redact`)",
                )

    def _refuse_unmatched_removals(
        self,
        cur: Cursor,
        tenant_id: str,
        events: Sequence[LakeEvent],
        inserted: dict[str, int],
        offset: int,
    ) -> None:
        """A verdict's removal removes, once, a verdict the log holds before it: of its
        own entry, under the key and with the verdict it names (as an admin's removal
        writes it, `FeedbackWrites.remove_verdict`). A removal a redaction rewrote names
        nothing any more, and is left alone."""
        removals = [
            inserted[e.idempotency_key]
            for e in events
            if e.event_type is EventType.FEEDBACK_REMOVED and e.idempotency_key in inserted
        ]
        if not removals:
            return
        cur.execute(
            "SELECT r.idempotency_key FROM org_memory_events r"
            " WHERE r.tenant_id = %(tenant)s AND r.event_id = ANY(%(ids)s)"
            "   AND NOT (r.payload ? 'redacted') AND ("
            "   NOT EXISTS (SELECT 1 FROM org_memory_events v"
            "     WHERE v.tenant_id = r.tenant_id"
            "       AND v.idempotency_key = r.payload->>'verdict_key'"
            "       AND v.event_type = 'feedback_recorded' AND v.entry_id = r.entry_id"
            "       AND v.payload->>'verdict' = r.payload->>'verdict'"
            "       AND v.event_id < r.event_id)"
            "   OR EXISTS (SELECT 1 FROM org_memory_events o"
            "     WHERE o.tenant_id = r.tenant_id AND o.event_type = 'feedback_removed'"
            "       AND o.payload->>'verdict_key' = r.payload->>'verdict_key'"
            "       AND o.event_id <> r.event_id))"
            " ORDER BY r.event_id LIMIT 1",
            {"tenant": tenant_id, "ids": removals},
        )
        row = cur.fetchone()
        if row is None:
            return
        index = [e.idempotency_key for e in events].index(row["idempotency_key"])
        raise InvalidInputError(
            f"events.{offset + index}.payload.verdict_key",
            "a verdict's removal removes, once, a verdict of its entry recorded before it "
            "(with the verdict it names); nothing of the batch was stored",
        )

    def _refuse_orphans(
        self, cur: Cursor, tenant_id: str, events: Sequence[LakeEvent], offset: int
    ) -> None:
        """Every event's entry is created in the log (by now): a replay can fold it."""
        cur.execute(
            "SELECT e.id FROM unnest(%s::uuid[]) AS e(id) WHERE NOT EXISTS ("
            " SELECT 1 FROM org_memory_events c WHERE c.tenant_id = %s AND c.entry_id = e.id"
            "   AND c.event_type = 'entry_created')",
            (sorted({e.entry_id for e in events}), tenant_id),
        )
        orphan = cur.fetchone()
        if orphan is not None:
            index = next(i for i, e in enumerate(events) if e.entry_id == orphan["id"])
            raise InvalidInputError(
                "events",
                f"event {offset + index}: entry {orphan['id']} is never created in the stream",
            )
