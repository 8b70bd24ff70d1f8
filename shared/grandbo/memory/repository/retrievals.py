"""The retrieval log's SQL: one self-scoped statement per retrieval written (migration
0032's grandbo_log_retrieval), the newest first read back, the expired forgotten."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from uuid import UUID

import psycopg
from psycopg import sql

from grandbo.errors import StoreUnavailableError
from grandbo.memory.domain.log_quotes import REMOVED
from grandbo.memory.domain.models import DEFAULT_EPISODIC_TTL_DAYS
from grandbo.memory.domain.retrieval_log import (
    RECENT_QUESTIONS,
    RETRIEVAL_DAYS,
    RETRIEVAL_ROWS_PER_DAY,
    CallerDay,
    HitEntry,
    IncidentAsked,
    IncidentVerdict,
    LoggedDay,
    LogRemoval,
    Retrieval,
    RetrievalHit,
    RetrievalRecord,
    VerdictRemoval,
)
from grandbo.storage.tenant_scope import TenantScopedRepository
from grandbo.tenancy import require_tenant
from grandbo.text.spelling import SPELLING_RULES, spellings

_ROWS = (
    "SELECT retrieval_id, at, caller, incident_id, topic, hits, latency_ms, no_precedent"
    " FROM org_memory_retrievals WHERE tenant_id = %(tenant)s"
    " AND (%(incident)s::text IS NULL OR incident_id = %(incident)s)"
    " AND (%(at)s::timestamptz IS NULL OR (at, retrieval_id) < (%(at)s, %(id)s::uuid))"
)
_PAGE = _ROWS + " ORDER BY at DESC, retrieval_id DESC LIMIT %(limit)s"
# the same, through migration 0034's index of the questions that served no hit
_UNANSWERED_PAGE = (
    _ROWS + " AND jsonb_array_length(hits) = 0 ORDER BY at DESC, retrieval_id DESC LIMIT %(limit)s"
)


# the questions (`r`) of a tenant that served an entry since redacted and that no
# redaction went over: what the audit counts and its repair blanks
_UNSCRUBBED = (
    " WHERE r.tenant_id = %s AND NOT r.scrubbed AND EXISTS ("
    "   SELECT 1 FROM jsonb_array_elements(r.hits) h"
    "   JOIN org_memory_entries e ON e.tenant_id = r.tenant_id"
    "     AND e.entry_id = (h->>'entry_id')::uuid"
    "   WHERE e.status = 'redacted')"
)
_COUNT_UNSCRUBBED = sql.SQL("SELECT count(*) AS n FROM org_memory_retrievals r{}").format(
    sql.SQL(_UNSCRUBBED)
)
# (the incident id too: the platform's ids can carry words)
_BLANK_UNSCRUBBED = sql.SQL(
    "UPDATE org_memory_retrievals r SET topic = %s, incident_id = NULL, scrubbed = true{}"
    " RETURNING r.retrieval_id"
).format(sql.SQL(_UNSCRUBBED))


_DAYS = (
    "SELECT day, logged, dropped, {unlogged} AS unlogged FROM org_memory_retrieval_days"
    " WHERE tenant_id = %s AND day > (now() AT TIME ZONE 'UTC')::date - %s"
    " ORDER BY day DESC"
)
_DAYS_LOGGED = _DAYS.format(unlogged="unlogged")
_DAYS_LOGGED_BEFORE_0038 = _DAYS.format(unlogged="0")


# the log's write, newest first: 0040's (the question's spellings), 0034's (the day's
# bound), 0032's
_LOG_STATEMENTS = [
    # the 11th argument: the round of the spelling rules that spelled the question (0042)
    (
        11,
        "SELECT grandbo_log_retrieval(%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::smallint)",
    ),
    (10, "SELECT grandbo_log_retrieval(%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)"),
    (9, "SELECT grandbo_log_retrieval(%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s)"),
    (8, "SELECT grandbo_log_retrieval(%s, %s, %s, %s, %s, %s::jsonb, %s, %s)"),
]


class RetrievalLog(TenantScopedRepository):
    """Write, list and forget an organization's retrievals."""

    def log_retrievals(self, records: Sequence[RetrievalRecord]) -> None:
        """Write retrievals, of any tenants, in one round trip: each its own self-scoped
        statement (grandbo_log_retrieval sets its tenant), pipelined by executemany."""
        if not records:
            return
        if not self._conn.autocommit:  # inside a caller's transaction it would stay open
            raise RuntimeError("the retrieval log needs an autocommit connection")
        rows = [
            (
                require_tenant(r.tenant_id),
                r.at,
                r.caller,
                r.incident_id,
                r.topic,
                json.dumps([hit.model_dump(mode="json") for hit in r.hits]),
                r.latency_ms,
                r.no_precedent,
                RETRIEVAL_ROWS_PER_DAY,
                # what the redactions search, and check the question against (0040)
                spellings(r.topic, r.incident_id),
                SPELLING_RULES,
            )
            for r in records
        ]
        try:
            with self._conn.cursor() as cur:
                for arity, statement in _LOG_STATEMENTS:
                    # a database before migration 0042 (0040, 0034): code deployed ahead of it
                    # writes with the function that database has
                    try:
                        cur.executemany(statement, [row[:arity] for row in rows])
                        break
                    except psycopg.errors.UndefinedFunction:
                        if arity == _LOG_STATEMENTS[-1][0]:
                            raise
        except psycopg.OperationalError as exc:
            self._discard_unless_idle()
            raise StoreUnavailableError(str(exc)) from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:  # a demoted writer: retry
            raise StoreUnavailableError(f"the database is read-only (a failover?): {exc}") from exc

    def retrievals(
        self,
        tenant_id: str,
        *,
        incident_id: str | None = None,
        unanswered: bool = False,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Retrieval]:
        """The organization's retrievals newest first (one incident's, where named; only
        those that served no hit, with `unanswered`: an index of their own), those before
        the (time, id) cursor `before` if given: ties in time are kept in id order, so no
        page skips a row."""
        at, retrieval_id = before if before is not None else (None, None)
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                _UNANSWERED_PAGE if unanswered else _PAGE,
                {
                    "tenant": tenant_id,
                    "incident": incident_id,
                    "at": at,
                    "id": retrieval_id,
                    "limit": limit,
                },
            )
            return [
                Retrieval(**{**row, "hits": [RetrievalHit.model_validate(h) for h in row["hits"]]})
                for row in cur.fetchall()
            ]

    def hit_entries(self, tenant_id: str, ids: list[UUID]) -> dict[UUID, HitEntry]:
        """The entries of these ids as they stand now: title and status (a redacted
        entry's title is gone with its text)."""
        if not ids:
            return {}
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT entry_id, CASE WHEN status = 'redacted' THEN NULL ELSE title END"
                " AS title, status FROM org_memory_entries"
                " WHERE tenant_id = %s AND entry_id = ANY(%s)",
                (tenant_id, ids),
            )
            return {
                row["entry_id"]: HitEntry(title=row["title"], status=row["status"]) for row in cur
            }

    def incident_verdicts(self, tenant_id: str, incident_id: str) -> list[IncidentVerdict]:
        """The verdicts given during the incident, oldest first (at most 500), each with
        its removal where an admin removed it (migration 0036's index finds it)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT v.event_id AS verdict_id, v.entry_id,"
                " v.payload->>'verdict' AS verdict, v.payload->>'note' AS note, v.actor,"
                " v.recorded_at, r.actor AS removed_by, r.recorded_at AS removed_at,"
                " r.payload->>'reason' AS reason"
                " FROM org_memory_events v LEFT JOIN LATERAL ("
                "   SELECT actor, recorded_at, payload FROM org_memory_events"
                "   WHERE tenant_id = v.tenant_id AND event_type = 'feedback_removed'"
                "     AND payload->>'verdict_key' = v.idempotency_key"
                "   ORDER BY event_id LIMIT 1) r ON true"
                " WHERE v.tenant_id = %s AND v.event_type = 'feedback_recorded'"
                "   AND v.payload->>'incident_id' = %s"
                " ORDER BY v.recorded_at, v.event_id LIMIT 500",
                (tenant_id, incident_id),
            )
            return [
                IncidentVerdict(
                    verdict_id=row["verdict_id"],
                    entry_id=row["entry_id"],
                    verdict=row["verdict"],
                    note=row["note"],
                    actor=row["actor"],
                    recorded_at=row["recorded_at"],
                    removal=None
                    if row["removed_by"] is None
                    else VerdictRemoval(
                        actor=row["removed_by"],
                        removed_at=row["removed_at"],
                        reason=row["reason"] or "",
                    ),
                )
                for row in cur
            ]

    def retrieval_incidents(self, tenant_id: str, limit: int) -> list[IncidentAsked]:
        """The incidents whose agent asked memory among the organization's latest
        RECENT_QUESTIONS questions that named one, the latest asked first: a bounded read of
        the newest rows (an index of those naming an incident), whatever the log holds."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT incident_id, count(*) AS asked,"
                " count(*) FILTER (WHERE jsonb_array_length(hits) = 0) AS unanswered,"
                " min(at) AS first_at, max(at) AS last_at"
                " FROM (SELECT incident_id, hits, at FROM org_memory_retrievals"
                "   WHERE tenant_id = %s AND incident_id IS NOT NULL"
                "   ORDER BY at DESC LIMIT %s) recent"
                " GROUP BY incident_id ORDER BY max(at) DESC, incident_id LIMIT %s",
                (tenant_id, RECENT_QUESTIONS, limit),
            )
            return [IncidentAsked.model_validate(row) for row in cur]

    def remove_retrieval(
        self, tenant_id: str, retrieval_id: UUID, actor: str, reason: str
    ) -> str | None:
        """One logged question deleted, and recorded (who, when, why and its topic's
        SHA-256: migration 0034's org_memory_log_removals) in the same transaction; the
        digest, or None where the organization's log holds no such question."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "DELETE FROM org_memory_retrievals WHERE tenant_id = %s AND retrieval_id = %s"
                " RETURNING encode(sha256(convert_to(topic, 'UTF8')), 'hex') AS digest",
                (tenant_id, retrieval_id),
            )
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute(
                "INSERT INTO org_memory_log_removals"
                " (tenant_id, retrieval_id, topic_sha256, actor, reason)"
                " VALUES (%s, %s, %s, %s, %s)",
                (tenant_id, retrieval_id, row["digest"], actor, reason),
            )
            return str(row["digest"])

    def log_removals(self, tenant_id: str, limit: int = 50) -> list[LogRemoval]:
        """The questions removed from the organization's log, the latest first."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT retrieval_id, topic_sha256, actor, reason, removed_at"
                " FROM org_memory_log_removals WHERE tenant_id = %s"
                " ORDER BY removed_at DESC LIMIT %s",
                (tenant_id, limit),
            )
            return [LogRemoval.model_validate(row) for row in cur]

    def retrieval_days_logged(self, tenant_id: str, days: int) -> list[LoggedDay]:
        """The organization's last `days` days of the log: rows kept and dropped by the
        day's bound (days with neither left out), the latest first; none on a schema
        before migration 0034."""
        try:
            return self._days_logged(tenant_id, days)
        except psycopg.errors.UndefinedTable:
            return []

    def _days_logged(self, tenant_id: str, days: int) -> list[LoggedDay]:
        try:
            return self._days(tenant_id, days, _DAYS_LOGGED)
        except psycopg.errors.UndefinedColumn:  # before migration 0038: nothing unlogged
            return self._days(tenant_id, days, _DAYS_LOGGED_BEFORE_0038)

    def _days(self, tenant_id: str, days: int, query: str) -> list[LoggedDay]:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(query, (tenant_id, days))
            return [LoggedDay.model_validate(row) for row in cur]

    def callers_dropped(self, tenant_id: str, days: int) -> list[CallerDay]:
        """The callers whose questions the log dropped in the last `days` days (UTC), the
        most dropped first (none before migration 0038)."""
        try:
            with self._tenant_scope(tenant_id) as cur:
                cur.execute(
                    "SELECT day, caller, logged, dropped FROM org_memory_retrieval_caller_days"
                    " WHERE tenant_id = %s AND dropped > 0"
                    " AND day > (now() AT TIME ZONE 'UTC')::date - %s"
                    " ORDER BY dropped DESC, day DESC, caller LIMIT 20",
                    (tenant_id, days),
                )
                return [CallerDay.model_validate(row) for row in cur]
        except psycopg.errors.UndefinedTable:
            return []

    def count_unlogged(self, gaps: Mapping[tuple[str, date], int]) -> None:
        """File what the log could not write, per organization and day (migration 0038's
        grandbo_count_unlogged: self-scoped statements, one round trip)."""
        if not gaps:
            return
        rows = [(require_tenant(t), day, n) for (t, day), n in gaps.items() if n > 0]
        try:
            with self._conn.cursor() as cur:
                cur.executemany("SELECT grandbo_count_unlogged(%s, %s, %s)", rows)
        except psycopg.OperationalError as exc:
            self._discard_unless_idle()
            raise StoreUnavailableError(str(exc)) from exc

    def unscrubbed_retrievals(self, tenant_id: str) -> int:
        """Logged questions that served an entry since redacted and that no redaction went
        over (`grandbo audit`): they may quote its text."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(_COUNT_UNSCRUBBED, (tenant_id,))
            row = cur.fetchone()
            return 0 if row is None else int(row["n"])

    def blank_unscrubbed_retrievals(self, tenant_id: str) -> int:
        """The repair of `unscrubbed_retrievals`: their topics removed whole (the text
        they may quote is gone, so no finer cut can be made); how many."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(_BLANK_UNSCRUBBED, (REMOVED, tenant_id))
            blanked = [row["retrieval_id"] for row in cur.fetchall()]
            if blanked:
                cur.execute(
                    "UPDATE org_memory_retrieval_spellings SET spelled = %s, full_rules = true"
                    " WHERE tenant_id = %s AND retrieval_id = ANY(%s::uuid[])",
                    (spellings(REMOVED), tenant_id, blanked),
                )
            return len(blanked)

    def forget_retrievals(self, tenant_id: str) -> int:
        """Delete the organization's retrievals past its retention; how many."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "DELETE FROM org_memory_retrievals WHERE tenant_id = %s"
                " AND at < now() - make_interval(days => coalesce(("
                "   SELECT retrieval_days FROM org_memory_tenant_settings"
                "   WHERE tenant_id = %s), %s))",
                (tenant_id, tenant_id, RETRIEVAL_DAYS),
            )
            return cur.rowcount

    def retrieval_days(self, tenant_id: str) -> int:
        """How long the organization keeps its retrievals (RETRIEVAL_DAYS unless set)."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "SELECT retrieval_days FROM org_memory_tenant_settings WHERE tenant_id = %s",
                (tenant_id,),
            )
            row = cur.fetchone()
            days = None if row is None else row["retrieval_days"]
            return RETRIEVAL_DAYS if days is None else int(days)

    def set_retrieval_days(self, tenant_id: str, days: int) -> None:
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "INSERT INTO org_memory_tenant_settings"
                " (tenant_id, episodic_ttl_days, retrieval_days) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id) DO UPDATE SET retrieval_days = excluded.retrieval_days",
                (tenant_id, DEFAULT_EPISODIC_TTL_DAYS, days),
            )
