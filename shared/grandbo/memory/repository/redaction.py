"""Redaction: an entry's text removed for good, from the entry, its recurrences (unless
kept), every payload of their events, their postings, tag statistics and vectors, and the
retrieval log's questions that quote it (`grandbo.memory.domain.log_quotes`).

The event payloads are rewritten by `grandbo_redact_events` (migration 0019), the one
owned path through the log's append-only trigger; everything else is cleared here in the
same transaction, so a redaction is whole or nothing. What stays: the entry's id, its
dates, its service and counts, and a tombstone saying when, by whom and why, with the
SHA-256 of every payload removed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from grandbo.errors import EntryNotFoundError, EntryRedactedError
from grandbo.memory.domain.log_quotes import quotes_of
from grandbo.memory.domain.models import (
    REDACTED_TEXT,
    EntryStatus,
    EventType,
    MemoryEntry,
    RedactionOutcome,
    RemovedPayload,
    Tombstone,
    WriteContext,
)
from grandbo.memory.domain.redacted_text import text_digest
from grandbo.memory.domain.redaction_receipt import RedactionReceipt
from grandbo.memory.repository.entries import ENTRY_BY_ID_FOR_UPDATE, SELECT_ENTRIES
from grandbo.memory.repository.log_scrub import (
    Reach,
    issue_receipt,
    keep_digests,
    read_receipt,
    scrub_log,
    scrub_notes,
)
from grandbo.memory.repository.postings import unpost_tags
from grandbo.memory.repository.recurrences import (
    DERIVE_RECURRENCES,
    RecurrenceReads,
    _derived,
)
from grandbo.storage.tenant_scope import Cursor, TenantLock

_TOMBSTONE = (
    "SELECT entry_id, recorded_at, actor, payload->>'reason' AS reason, idempotency_key"
    " FROM org_memory_events WHERE tenant_id = %s AND entry_id = %s"
    "   AND event_type = 'entry_redacted'"
)


# Which of these incident ids an event of the tenant still names, on the cursor
StillNamed = Callable[[Cursor, str, list[str]], set[str]]
# (cursor, tenant, incident ids, still named): the learned graph forgets those no event names
ForgetIncidents = Callable[[Cursor, str, list[str], StillNamed], None]


def _still_named(cur: Cursor, tenant_id: str, incident_ids: list[str]) -> set[str]:
    cur.execute(
        "SELECT DISTINCT payload->>'incident_id' AS incident FROM org_memory_events"
        " WHERE tenant_id = %s AND payload->>'incident_id' = ANY(%s)",
        (tenant_id, incident_ids),
    )
    return {row["incident"] for row in cur}


class RedactionWrites(RecurrenceReads):
    """Redact an entry; read its tombstone."""

    def redact_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        reason: str,
        context: WriteContext,
        *,
        keep_recurrences: bool = False,
        forget_incidents: ForgetIncidents | None = None,
        also: Sequence[str] = (),
    ) -> RedactionOutcome:
        """Remove the entry's text (and, unless `keep_recurrences`, that of the entries
        merged into it; kept, they resurface first) for good. A retry with the same key
        answers the same tombstone (applied=False); another redaction of a redacted entry
        is EntryRedactedError. The incident ids they named go to `forget_incidents` in
        the same transaction, with the question which of them events still name (asked
        under the incidents' locks): the learned graph keys its nodes of them by their
        digest. `also`: strings the person redacting lists besides the text (a short code,
        a passphrase), removed from the log and the notes in every spelling too. Ends
        with the redaction's receipt (`grandbo.memory.repository.log_scrub`)."""
        with self._tenant_scope(tenant_id, lock=TenantLock.WRITE) as cur:
            cur.execute(ENTRY_BY_ID_FOR_UPDATE, (tenant_id, entry_id))
            row = cur.fetchone()
            if row is None:
                raise EntryNotFoundError(entry_id)
            current = MemoryEntry.model_validate(row)
            if current.status is EntryStatus.REDACTED:
                earlier, key = self._tombstone(cur, tenant_id, current)
                if key == context.idempotency_key:
                    return RedactionOutcome(
                        tombstone=earlier,
                        applied=False,
                        entries=[entry_id],
                        removed=[],
                        receipt=read_receipt(cur, tenant_id, entry_id),
                    )
                raise EntryRedactedError(entry_id, earlier.model_dump(mode="json"))
            rehomed = None
            if keep_recurrences:
                rehomed = self._rehome_recurrences(cur, tenant_id, entry_id, None, context)
            cur.execute(
                SELECT_ENTRIES + sql.SQL("merged_into = %s ORDER BY entry_id FOR UPDATE"),
                (tenant_id, entry_id),
            )
            targets = [current, *(MemoryEntry.model_validate(r) for r in cur)]
            ids = [target.entry_id for target in targets]
            # the entries any of them was merged into lose a recurrence
            canonicals = {t.merged_into for t in targets if t.merged_into} - set(ids)
            # the projection first: the owned function rewrites the history of tombstones
            # only (migration 0019)
            cur.execute(
                "UPDATE org_memory_entries SET title = %s, summary = %s, tags = '{}',"
                " given_tags = '{}', status = 'redacted', merged_into = NULL, never_merge = true,"
                " incident_id = NULL, embedding = NULL, embed_rev = NULL,"
                " embedded_revision = NULL, embedded_at = NULL, seen_count = 1,"
                " last_seen_at = NULL, seen_in_incidents = '{}'"
                " WHERE tenant_id = %s AND entry_id = ANY(%s)",
                (REDACTED_TEXT, REDACTED_TEXT, tenant_id, ids),
            )
            texts, said = self._removed_texts(cur, tenant_id, targets)
            cur.execute(
                "SELECT * FROM grandbo_redact_events(%s, %s, %s, %s, %s, %s)",
                (
                    tenant_id,
                    ids,
                    [target.revision for target in targets],
                    [
                        Jsonb(_tombstone_payload(target, reason, entry_id, texts[target.entry_id]))
                        for target in targets
                    ],
                    context.actor,
                    [context.idempotency_key]
                    + [_derived(context, t.entry_id).idempotency_key for t in targets[1:]],
                ),
            )
            removed = [RemovedPayload.model_validate(r) for r in cur]
            cur.execute(
                "UPDATE org_memory_entries e SET updated_at = r.recorded_at"
                " FROM org_memory_events r"
                " WHERE r.tenant_id = e.tenant_id AND r.entry_id = e.entry_id"
                "   AND r.event_type = 'entry_redacted'"
                "   AND e.tenant_id = %s AND e.entry_id = ANY(%s)",
                (tenant_id, ids),
            )
            for canonical in sorted(canonicals):
                cur.execute(DERIVE_RECURRENCES, (tenant_id, canonical))
            # only an active entry counts in the statistics (a recurrence left them when
            # it was merged); every tag row left at zero goes, whoever's it was: a tag of
            # no entry is no statistic, and a removed text's words must not stay as tags
            self._count_tags(
                cur,
                tenant_id,
                leaving=[current.index_tags] if current.status is EntryStatus.ACTIVE else [],
            )
            for target in ids:
                unpost_tags(cur, tenant_id, target)
            cur.execute(
                "DELETE FROM org_memory_tag_stats WHERE tenant_id = %s AND doc_count = 0",
                (tenant_id,),
            )
            cur.execute(
                "DELETE FROM org_memory_staged_vectors WHERE tenant_id = %s AND entry_id = ANY(%s)",
                (tenant_id, ids),
            )
            named = sorted({t.incident_id for t in targets if t.incident_id is not None})
            # the retrieval log: the questions quoting the text in any spelling, and the
            # incidents' ids no event names any more (issues 44, 52); verdicts' notes
            quotes = quotes_of(said, also)
            places = [
                Reach("entries (title, summary, tags, incident id, vector)", len(ids), len(ids), 0),
                Reach("entry events (payloads, actors, keys)", len(removed), len(removed), 0),
                *scrub_log(
                    cur,
                    tenant_id,
                    ids,
                    named,
                    sorted(set(named) - _still_named(cur, tenant_id, named)) if named else [],
                    quotes,
                ),
                scrub_notes(cur, tenant_id, quotes),
            ]
            spelt = keep_digests(cur, tenant_id, entry_id, quotes)
            issue_receipt(cur, tenant_id, entry_id, context.actor, spelt, places)
            if named and forget_incidents is not None:
                # last, so the incidents' locks it takes are waited for holding nothing
                # another write of them could want
                forget_incidents(cur, tenant_id, named, _still_named)
            tombstone, _ = self._tombstone(cur, tenant_id, current)
            return RedactionOutcome(
                tombstone=tombstone,
                applied=True,
                entries=ids,
                removed=removed,
                recurrences=rehomed,
                receipt=read_receipt(cur, tenant_id, entry_id),
            )

    @staticmethod
    def _removed_texts(
        cur: Cursor, tenant_id: str, targets: list[MemoryEntry]
    ) -> tuple[dict[UUID, list[str]], list[str]]:
        """The digest of every text each target said (every revision's), which its
        tombstone keeps so the same text arriving again is refused; and those texts,
        titles and summaries, which the retrieval log's questions may quote."""
        digests: dict[UUID, set[str]] = {t.entry_id: set() for t in targets}
        said: list[str] = []
        for target in targets:
            digests[target.entry_id].add(text_digest(target.title, target.summary))
            said += [target.title, target.summary, " ".join([*target.tags, *target.index_tags])]
        cur.execute(
            "SELECT entry_id, payload->>'title' AS title, payload->>'summary' AS summary,"
            " payload->'given_tags' AS given_tags"
            " FROM org_memory_events WHERE tenant_id = %s AND entry_id = ANY(%s)"
            "   AND event_type IN ('entry_created', 'entry_corrected')"
            "   AND NOT (payload ? 'redacted')",
            (tenant_id, list(digests)),
        )
        for row in cur:
            if isinstance(row["title"], str) and isinstance(row["summary"], str):
                digests[row["entry_id"]].add(text_digest(row["title"], row["summary"]))
                said += [row["title"], row["summary"]]
            if isinstance(row["given_tags"], list):  # every revision's tags as written
                said.append(" ".join(t for t in row["given_tags"] if isinstance(t, str)))
        return {entry_id: sorted(found) for entry_id, found in digests.items()}, said

    def count_redactions(self, tenant_id: str) -> int:
        """How many of the tenant's entries are tombstones."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT count(*) AS n FROM org_memory_entries"
                " WHERE tenant_id = %s AND status = 'redacted'",
                (tenant_id,),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["n"])

    def redaction_receipt(self, tenant_id: str, entry_id: UUID) -> RedactionReceipt | None:
        """The receipt of the entry's redaction, if it has one (issue 52)."""
        with self._tenant_scope(tenant_id) as cur:
            return read_receipt(cur, tenant_id, entry_id)

    def tombstone(self, tenant_id: str, entry_id: UUID) -> Tombstone | None:
        """The entry's tombstone if it was redacted, else None."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(_TOMBSTONE, (tenant_id, entry_id))
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute(
                "SELECT created_at FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
                (tenant_id, entry_id),
            )
            entry = cur.fetchone()
            return _as_tombstone(row, entry["created_at"] if entry else row["recorded_at"])

    def _tombstone(self, cur: Cursor, tenant_id: str, entry: MemoryEntry) -> tuple[Tombstone, str]:
        cur.execute(_TOMBSTONE, (tenant_id, entry.entry_id))
        row = cur.fetchone()
        assert row is not None, "a redacted entry has its redaction event"
        return _as_tombstone(row, entry.created_at), str(row["idempotency_key"])


def _as_tombstone(row: dict[str, Any], created_at: Any) -> Tombstone:
    return Tombstone(
        entry_id=row["entry_id"],
        redacted_at=row["recorded_at"],
        redacted_by=row["actor"],
        reason=row["reason"],
        created_at=created_at,
    )


def _tombstone_payload(
    entry: MemoryEntry, reason: str, redacted: UUID, texts: list[str]
) -> dict[str, Any]:
    """What the replay needs to make the tombstone row again, nothing of the text, and
    the digests of the texts removed (`grandbo.memory.domain.redacted_text`)."""
    return {
        "text_sha256": texts,
        "reason": reason,
        "redacted_with": None if entry.entry_id == redacted else str(redacted),
        "event": EventType.REDACTED.value,
        "origin": entry.origin.value,
        "kind": entry.kind.value,
        "expires_at": None if entry.expires_at is None else entry.expires_at.isoformat(),
        "service": entry.service,
        # the incident's id goes with the text: the platform's ids can carry words
        "incident_id": None,
        "superseded_by": None if entry.superseded_by is None else str(entry.superseded_by),
        "helpful_count": entry.helpful_count,
        "not_helpful_count": entry.not_helpful_count,
        "misleading_count": entry.misleading_count,
    }
