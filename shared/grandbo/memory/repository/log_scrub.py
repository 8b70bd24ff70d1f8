"""A redaction's reach into what questions and verdicts said (issue 52), on the redaction's
transaction: the retrieval log's questions and their incident ids, and verdicts' notes,
searched for the removed text in every spelling (`grandbo.text.spelling`), each through an
index the application role can use under row-level security (migration 0040's
grandbo_log_reach), rewritten set-based (one statement per table, whatever the count);
the removed spellings kept as salted digests, so a question filed later is checked on
write; and the counts a receipt states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from grandbo.memory.domain.log_quotes import REMOVED, Quotes, without_quotes
from grandbo.memory.domain.redaction_receipt import RedactionReceipt
from grandbo.storage.tenant_scope import Cursor
from grandbo.text.spelling import spelling_digest, spellings

MAX_DIGESTED = 2000
# questions only the database spelled that a redaction spells again itself (~0.1 ms a
# sentence); beyond, the receipt says how many it could not (the audit's repair spells
# them)
MAX_RESPELLED = 10_000
UNSPELLED_PLACE = "retrieval log: questions only the database spelled, not spelled again"


@dataclass(frozen=True)
class Reach:
    """What a search of one place found, what was removed, what is left after."""

    place: str
    found: int
    removed: int
    left: int

    def as_json(self) -> dict[str, Any]:
        return {
            "place": self.place,
            "found": self.found,
            "removed": self.removed,
            "left": self.left,
        }


def _patterns(quotes: Quotes) -> list[str]:
    # spellings hold letters and digits only: no LIKE wildcard to escape
    return [f"%{p}%" for p in sorted(quotes.compact_tokens)]


def _ready(cur: Cursor) -> bool:
    """Whether migration 0040 ran (code deployed ahead of it scrubs nothing here: the
    audit finds those rows once it runs)."""
    cur.execute("SELECT to_regclass('org_memory_retrieval_spellings') IS NOT NULL AS ready")
    row = cur.fetchone()
    return bool(row and row["ready"])


def _reached(
    cur: Cursor, tenant_id: str, patterns: list[str], served: Sequence[UUID]
) -> dict[UUID, bool]:
    cur.execute(
        "SELECT retrieval_id, bool_or(tied) AS tied"
        " FROM grandbo_log_reach(%s, %s::text[], %s::uuid[]) GROUP BY retrieval_id",
        (tenant_id, patterns, list(served)),
    )
    return {row["retrieval_id"]: bool(row["tied"]) for row in cur}


def scrub_log(
    cur: Cursor,
    tenant_id: str,
    entry_ids: Sequence[UUID],
    incidents: Sequence[str],
    forgotten: Sequence[str],
    quotes: Quotes,
) -> list[Reach]:
    """Every logged question of the tenant that served the redacted entries, was asked
    under their `incidents`, or spells a removed text anywhere (its topic, its incident
    id, their base64 tokens) rewritten without it and marked scrubbed; an incident id that
    spells it, or one of the `forgotten` incidents (no event names it any more), removed.
    The reach: (questions, incident ids)."""
    if not _ready(cur):
        return []
    patterns = _patterns(quotes)
    reached = _reached(cur, tenant_id, patterns, entry_ids)
    unspelled = _respelled_reach(cur, tenant_id, quotes, reached)
    if incidents:
        cur.execute(
            "SELECT retrieval_id FROM org_memory_retrievals"
            " WHERE tenant_id = %s AND incident_id = ANY(%s::text[])",
            (tenant_id, list(incidents)),
        )
        for row in cur:
            reached[row["retrieval_id"]] = True
    if not reached:
        return [
            Reach("retrieval log: questions", 0, 0, 0),
            Reach("retrieval log: incident ids", 0, 0, 0),
            *unspelled,
        ]
    cur.execute(
        "SELECT retrieval_id, topic, incident_id FROM org_memory_retrievals"
        " WHERE tenant_id = %s AND retrieval_id = ANY(%s::uuid[])",
        (tenant_id, list(reached)),
    )
    gone = set(forgotten)
    ids: list[UUID] = []
    topics: list[str] = []
    named: list[str | None] = []
    spelt: list[str] = []
    topics_removed = incidents_found = incidents_removed = 0
    for row in cur.fetchall():
        tied = reached[row["retrieval_id"]]
        topic = without_quotes(row["topic"], quotes, tied=tied)
        incident = row["incident_id"]
        if incident is not None:
            said = incident in gone or _spells_any(incident, quotes)
            incidents_found += said
            if said:
                incident = None
                incidents_removed += 1
        topics_removed += topic != row["topic"]
        ids.append(row["retrieval_id"])
        topics.append(topic)
        named.append(incident)
        spelt.append(spellings(topic, incident))
    cur.execute(
        "UPDATE org_memory_retrievals r SET topic = u.topic, incident_id = u.incident,"
        " scrubbed = true"
        " FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS u(id, topic, incident)"
        " WHERE r.tenant_id = %s AND r.retrieval_id = u.id",
        (ids, topics, named, tenant_id),
    )
    cur.execute(
        "UPDATE org_memory_retrieval_spellings s SET spelled = u.spelled, full_rules = true"
        " FROM unnest(%s::uuid[], %s::text[]) AS u(id, spelled)"
        " WHERE s.tenant_id = %s AND s.retrieval_id = u.id",
        (ids, spelt, tenant_id),
    )
    left = len(_reached(cur, tenant_id, patterns, [])) if patterns else 0
    return [
        Reach("retrieval log: questions", len(reached), topics_removed, left),
        Reach("retrieval log: incident ids", incidents_found, incidents_removed, 0),
        *unspelled,
    ]


def _respelled_reach(
    cur: Cursor, tenant_id: str, quotes: Quotes, reached: dict[UUID, bool]
) -> list[Reach]:
    """The questions only the database spelled (logged before migration 0040, by older
    code, or restored: no look-alikes, no base64), read by their partial index and spelled
    here with every rule, up to MAX_RESPELLED: each that spells a removed text is added to
    `reached`. Beyond that bound, what was not spelled is a place of the receipt, found and
    left (the audit's repair spells them; never said to hold nothing)."""
    cur.execute(
        "SELECT r.retrieval_id, r.topic, r.incident_id"
        " FROM org_memory_retrieval_spellings s JOIN org_memory_retrievals r"
        "   ON r.tenant_id = s.tenant_id AND r.retrieval_id = s.retrieval_id"
        " WHERE s.tenant_id = %s AND NOT s.full_rules LIMIT %s",
        (tenant_id, MAX_RESPELLED + 1),
    )
    rows = cur.fetchall()
    for row in rows[:MAX_RESPELLED]:
        spelt = spellings(row["topic"], row["incident_id"])
        if any(token in spelt for token in quotes.compact_tokens):
            reached.setdefault(row["retrieval_id"], False)
    if len(rows) <= MAX_RESPELLED:
        return []
    cur.execute(
        "SELECT count(*) AS n FROM org_memory_retrieval_spellings"
        " WHERE tenant_id = %s AND NOT full_rules",
        (tenant_id,),
    )
    counted = cur.fetchone()
    beyond = (0 if counted is None else int(counted["n"])) - MAX_RESPELLED
    return [Reach(UNSPELLED_PLACE, beyond, 0, beyond)]


def _spells_any(text: str, quotes: Quotes) -> bool:
    spelt = spellings(text)
    return any(token in spelt for token in quotes.compact_tokens) or any(
        token.casefold() in text.casefold() for token in quotes.tokens
    )


def standing_notes(cur: Cursor, tenant_id: str) -> list[tuple[int, str]]:
    """Every verdict's note of the tenant that stands (event id, note); its verdicts are
    bounded by their rate, and read by its scope's index."""
    cur.execute(
        "SELECT event_id, payload->>'note' AS note FROM org_memory_events"
        " WHERE tenant_id = %s AND event_type = 'feedback_recorded'"
        "   AND payload ? 'note' AND payload->>'note' <> %s",
        (tenant_id, REMOVED),
    )
    return [(r["event_id"], r["note"]) for r in cur.fetchall() if isinstance(r["note"], str)]


def remove_notes_on(cur: Cursor, tenant_id: str, event_ids: Sequence[int]) -> int:
    """These verdicts' notes rewritten to REMOVED while they stand (migration 0040's
    owned path past the log's append-only trigger); how many."""
    if not event_ids:
        return 0
    cur.execute("SELECT grandbo_remove_notes(%s, %s::bigint[]) AS n", (tenant_id, list(event_ids)))
    row = cur.fetchone()
    return 0 if row is None else int(row["n"])


def scrub_notes(cur: Cursor, tenant_id: str, quotes: Quotes) -> Reach:
    """Every verdict's note of the tenant that quotes a removed text, in any spelling,
    rewritten to REMOVED."""
    quoting = [
        event_id for event_id, note in standing_notes(cur, tenant_id) if _spells_any(note, quotes)
    ]
    # before 0040 no path removes a note: left, and said
    removed = remove_notes_on(cur, tenant_id, quoting) if _ready(cur) else 0
    return Reach("verdict notes", len(quoting), removed, len(quoting) - removed)


def keep_digests(cur: Cursor, tenant_id: str, entry_id: UUID, quotes: Quotes) -> int:
    """The salted digest of every spelling the redaction removed (never the spelling), so
    a question filed later that spells one is kept without its topic; how many."""
    # a token longer than MAX_DIGESTED (a pasted blob) is searched for and removed, but
    # not kept for the check on write (0040's bound on a kept spelling)
    spelt = sorted(t for t in quotes.compact_tokens if len(t) <= MAX_DIGESTED)
    if not spelt or not _ready(cur):
        return 0
    cur.execute(
        "INSERT INTO org_memory_spelling_salts (tenant_id) VALUES (%s)"
        " ON CONFLICT (tenant_id) DO NOTHING",
        (tenant_id,),
    )
    cur.execute("SELECT salt FROM org_memory_spelling_salts WHERE tenant_id = %s", (tenant_id,))
    row = cur.fetchone()
    assert row is not None, "the salt was just made"
    salt = bytes(row["salt"])
    cur.execute(
        "INSERT INTO org_memory_redacted_spellings (tenant_id, length, digest, entry_id)"
        " SELECT %s, length, digest, %s FROM unnest(%s::int[], %s::bytea[]) AS u(length, digest)"
        " ON CONFLICT DO NOTHING",
        (tenant_id, entry_id, [len(s) for s in spelt], [spelling_digest(salt, s) for s in spelt]),
    )
    return len(spelt)


def issue_receipt(
    cur: Cursor, tenant_id: str, entry_id: UUID, actor: str, spelt: int, places: list[Reach]
) -> None:
    """The redaction's receipt (migration 0040): where it searched, what it found and
    removed, what was left; digests only. None before 0040."""
    if not _ready(cur):
        return
    cur.execute(
        "INSERT INTO org_memory_redaction_receipts (tenant_id, entry_id, actor, spellings, places)"
        " VALUES (%s, %s, %s, %s, %s)",
        (tenant_id, entry_id, actor, spelt, Jsonb([p.as_json() for p in places])),
    )


def read_receipt(cur: Cursor, tenant_id: str, entry_id: UUID) -> RedactionReceipt | None:
    """The receipt of the entry's redaction (None: redacted before 0040, or not)."""
    if not _ready(cur):
        return None
    cur.execute(
        "SELECT entry_id, issued_at, actor, spellings, places, verified_at, verified_left"
        " FROM org_memory_redaction_receipts WHERE tenant_id = %s AND entry_id = %s",
        (tenant_id, entry_id),
    )
    row = cur.fetchone()
    return None if row is None else RedactionReceipt.model_validate(row)
