"""The retrieval log's spellings read back and mended (issue 52): the audit re-verifies
every redaction receipt against the questions the organization holds now, page by page,
and re-spells with every rule the questions only the database spelled (logged before
migration 0040, by older code, or restored from an older dump) or an earlier round of the
rules did (before migration 0042)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from grandbo.memory.domain.log_quotes import REMOVED
from grandbo.memory.repository.log_scrub import remove_notes_on, standing_notes
from grandbo.storage.tenant_scope import TenantScopedRepository
from grandbo.text.spelling import SPELLING_RULES, spellings

# the questions a page of the audit reads (their spellings, a few hundred bytes each)
SPELLING_PAGE = 5_000


@dataclass(frozen=True)
class RedactedSpellings:
    """What the organization's redactions removed, as digests: its salt, and per
    (length, digest) the redacted entry it came from."""

    salt: bytes
    digests: Mapping[tuple[int, bytes], UUID]


@dataclass(frozen=True)
class SpeltQuestion:
    retrieval_id: UUID
    spelled: str  # as the full rules spell it (re-spelled here where the database did)
    respelled: bool
    # what it was re-spelled from (a redaction may rewrite it before the spelling is kept)
    topic: str | None = None
    incident_id: str | None = None


class LogSpellings(TenantScopedRepository):
    """The audit's reads and repairs of the log's spellings."""

    def redacted_spellings(self, tenant_id: str) -> RedactedSpellings | None:
        """The organization's redacted spellings' digests, None if it redacted none
        (or before migration 0040)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute("SELECT to_regclass('org_memory_spelling_salts') IS NOT NULL AS ready")
            ready = cur.fetchone()
            if not (ready and ready["ready"]):
                return None
            cur.execute(
                "SELECT salt FROM org_memory_spelling_salts WHERE tenant_id = %s", (tenant_id,)
            )
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute(
                "SELECT length, digest, entry_id FROM org_memory_redacted_spellings"
                " WHERE tenant_id = %s",
                (tenant_id,),
            )
            digests = {(r["length"], bytes(r["digest"])): r["entry_id"] for r in cur}
            return RedactedSpellings(bytes(row["salt"]), digests) if digests else None

    def spelt_questions(
        self,
        tenant_id: str,
        after: UUID | None,
        limit: int = SPELLING_PAGE,
        *,
        unspelled_only: bool = False,
    ) -> list[SpeltQuestion]:
        """A page of the organization's questions in id order (`unspelled_only`: those the
        full rules never spelled), each as the full rules spell it: its kept spellings, or
        re-spelled from its topic and incident id where only the database spelled it or
        nothing did."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT r.retrieval_id, r.topic, r.incident_id, s.spelled,"
                "   s.full_rules AND s.rules >= %s AS current"
                " FROM org_memory_retrievals r LEFT JOIN org_memory_retrieval_spellings s"
                "   ON s.tenant_id = r.tenant_id AND s.retrieval_id = r.retrieval_id"
                " WHERE r.tenant_id = %s AND (%s::uuid IS NULL OR r.retrieval_id > %s)"
                "   AND (NOT %s OR s.retrieval_id IS NULL OR NOT s.full_rules"
                "        OR s.rules < %s)"
                " ORDER BY r.retrieval_id LIMIT %s",
                (SPELLING_RULES, tenant_id, after, after, unspelled_only, SPELLING_RULES, limit),
            )
            return [
                SpeltQuestion(row["retrieval_id"], row["spelled"], False)
                if row["spelled"] is not None and row["current"]
                else SpeltQuestion(
                    row["retrieval_id"],
                    spellings(row["topic"], row["incident_id"]),
                    True,
                    row["topic"],
                    row["incident_id"],
                )
                for row in cur.fetchall()
            ]

    def count_unspelled(self, tenant_id: str) -> int:
        """Questions the current rules never spelled (the database did, an earlier round
        of the rules did, or nothing did)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT count(*) AS n FROM org_memory_retrievals r"
                " WHERE r.tenant_id = %s AND NOT EXISTS ("
                "   SELECT 1 FROM org_memory_retrieval_spellings s"
                "   WHERE s.tenant_id = r.tenant_id AND s.retrieval_id = r.retrieval_id"
                "     AND s.full_rules AND s.rules >= %s)",
                (tenant_id, SPELLING_RULES),
            )
            row = cur.fetchone()
            return 0 if row is None else int(row["n"])

    def keep_spellings(self, tenant_id: str, questions: list[SpeltQuestion]) -> int:
        """The re-spelled questions' spellings kept (one statement); how many. Only where
        the question still says what it was spelled from (a redaction that rewrote it
        meanwhile kept its own spelling: never the removed text's again) and its kept
        spelling is still not the current rules'."""
        respelled = [q for q in questions if q.respelled]
        if not respelled:
            return 0
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_retrieval_spellings AS s"
                " (tenant_id, retrieval_id, spelled, served, full_rules)"
                " SELECT %s, r.retrieval_id, u.spelled,"
                "   ARRAY(SELECT (h->>'entry_id')::uuid FROM jsonb_array_elements(r.hits) h),"
                "   true"
                " FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[])"
                "   AS u(id, spelled, topic, incident)"
                " JOIN org_memory_retrievals r ON r.tenant_id = %s AND r.retrieval_id = u.id"
                "   AND r.topic = u.topic AND r.incident_id IS NOT DISTINCT FROM u.incident"
                " ON CONFLICT (tenant_id, retrieval_id) DO UPDATE"
                "   SET spelled = excluded.spelled, full_rules = true"
                "   WHERE NOT s.full_rules OR s.rules < %s",
                (
                    tenant_id,
                    [q.retrieval_id for q in respelled],
                    [q.spelled for q in respelled],
                    [q.topic for q in respelled],
                    [q.incident_id for q in respelled],
                    tenant_id,
                    SPELLING_RULES,
                ),
            )
            return cur.rowcount

    def mark_receipts_verified(self, tenant_id: str, left: Mapping[UUID, int]) -> None:
        """Each receipt of the organization: verified now, with what was found left."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "UPDATE org_memory_redaction_receipts r SET verified_at = clock_timestamp(),"
                " verified_left = coalesce(u.left_, 0)"
                " FROM (SELECT e.entry_id, l.left_"
                "   FROM org_memory_redaction_receipts e"
                "   LEFT JOIN unnest(%s::uuid[], %s::int[]) AS l(entry_id, left_)"
                "     ON l.entry_id = e.entry_id WHERE e.tenant_id = %s) u"
                " WHERE r.tenant_id = %s AND r.entry_id = u.entry_id",
                (list(left), list(left.values()), tenant_id, tenant_id),
            )

    def verdict_notes(self, tenant_id: str) -> list[tuple[int, str]]:
        """Every verdict's note of the organization that stands (event id, note)."""
        with self._tenant_scope(tenant_id) as cur:
            return standing_notes(cur, tenant_id)

    def blank_questions(self, tenant_id: str, ids: list[UUID]) -> int:
        """These questions' topics and incident ids removed whole, marked scrubbed."""
        if not ids:
            return 0
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "UPDATE org_memory_retrievals SET topic = %s, incident_id = NULL,"
                " scrubbed = true WHERE tenant_id = %s AND retrieval_id = ANY(%s::uuid[])",
                (REMOVED, tenant_id, ids),
            )
            blanked = cur.rowcount
            cur.execute(
                "UPDATE org_memory_retrieval_spellings SET spelled = %s, full_rules = true"
                " WHERE tenant_id = %s AND retrieval_id = ANY(%s::uuid[])",
                (spellings(REMOVED), tenant_id, ids),
            )
            return blanked

    def remove_notes(self, tenant_id: str, event_ids: list[int]) -> int:
        """These verdicts' notes rewritten to REMOVED; how many."""
        with self._tenant_scope(tenant_id) as cur:
            return remove_notes_on(cur, tenant_id, event_ids)

    def remove_note(self, tenant_id: str, event_id: int, actor: str, reason: str) -> str | None:
        """An admin's removal of one verdict's note, recorded (who, when, why and the
        note's SHA-256) in the same transaction; the digest, or None where the
        organization holds no such note standing."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT payload->>'note' AS note FROM org_memory_events"
                " WHERE tenant_id = %s AND event_id = %s AND event_type = 'feedback_recorded'",
                (tenant_id, event_id),
            )
            row = cur.fetchone()
            if row is None or not isinstance(row["note"], str) or row["note"] == REMOVED:
                return None
            # the owned path rewrites it only while it stands: a removal beside this one
            # leaves this one nothing to remove
            if remove_notes_on(cur, tenant_id, [event_id]) != 1:
                return None
            digest = hashlib.sha256(row["note"].encode("utf-8")).hexdigest()
            cur.execute(
                "INSERT INTO org_memory_note_removals"
                " (tenant_id, event_id, note_sha256, actor, reason) VALUES (%s, %s, %s, %s, %s)",
                (tenant_id, event_id, digest, actor, reason),
            )
            return digest
