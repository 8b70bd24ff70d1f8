"""The service layer: `query_org_memory` (the one read seam, `grandbo.memory.read.recall`) and
the write commands.

Every caller (Beacon's tool, chat, the Edge Bridge, the CLI, the Lambdas) goes through
these methods; none of them knows SQL or which embedding provider answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import TypeVar
from uuid import UUID

from pydantic import ValidationError

from grandbo.embedding.base import EmbeddingProvider
from grandbo.embedding.rerank import Reranker
from grandbo.errors import (
    EntryNotActiveError,
    EntryRedactedError,
    GrandboError,
    InvalidInputError,
    RetrievalNotFoundError,
    VerdictNotFoundError,
    invalid_input_from,
)
from grandbo.memory.domain import recalibration
from grandbo.memory.domain.embed_queue import EmbedQueue
from grandbo.memory.domain.idempotency import KeySpace, caller_key, idempotency_key
from grandbo.memory.domain.log_quotes import listed_strings
from grandbo.memory.domain.models import (
    DEFAULT_EPISODIC_TTL_DAYS,
    MAX_EPISODIC_TTL_DAYS,
    EmbedJob,
    EntryStatus,
    EntryText,
    Feedback,
    FeedbackRate,
    MemoryEntry,
    NewEntry,
    RedactionOutcome,
    Staleness,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.domain.retrieval_log import RemovedVerdict
from grandbo.memory.read.confidence.serving import validate_min_confidence
from grandbo.memory.read.recall import Recall, ServiceScopes
from grandbo.memory.read.staleness import stale_subjects
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.feedback import VerdictWrite
from grandbo.memory.vectors.blue_green import BlueGreen
from grandbo.memory.vectors.embedding_jobs import tenants_of
from grandbo.storage.tenant_scope import Cursor
from grandbo.tenancy import require_tenant
from grandbo.text.rules import reject_unsafe_text
from grandbo.text.tags import tags_for

_log = logging.getLogger(__name__)


def _reason(reason: object) -> str:
    """A retirement's or a redaction's reason: 1-2000 characters of safe text, stripped."""
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 2000:
        raise InvalidInputError("reason", "must be 1-2000 characters saying why")
    try:
        reject_unsafe_text(reason)
    except ValueError as exc:
        raise InvalidInputError("reason", str(exc)) from exc
    return reason.strip()


def _bounded(field: str, value: object, most: int) -> int | None:
    """A whole number from 1 to `most`, or None (not given)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidInputError(field, f"must be a whole number from 1 to {most:,}")
    return value


# Entries whose postings get their title flag per transaction (mark_title_tags)
TITLE_TAG_BATCH = 500
# An entry called misleading by more investigations than this is listed for admin review
# (feedback is shown on hits, never used to rank them until an evaluation shows it helps).
MISLEADING_REVIEW_THRESHOLD = 1
# One caller's verdicts per window: far above an investigation's (a few hits each, after
# it closes), far below a flood (2,411 in 20 s from one token, issue 24)
FEEDBACK_RATE = FeedbackRate(limit=120, window_s=300)
# One caller's queries per minute unless its organization set another: an agent's busiest
# minute (a few questions per hypothesis, several investigations at once) fits, a flood does
# not (one token wrote 5.6 log rows a second of 4,000-character topics, issue 44)
QUERY_RATE_PER_MINUTE = 600
MAX_QUERY_RATE_PER_MINUTE = 100_000
MAX_RETRIEVAL_ROWS_PER_DAY = 1_000_000


_Command = TypeVar("_Command", NewEntry, EntryText, Feedback)
# What a correction may name; what it does not name it keeps
_CORRECTABLE = frozenset({"title", "summary", "service", "tags"})


def _tags(text: EntryText) -> list[str]:
    """An entry's tags: its title, summary and service, plus the tags it was given."""
    return tags_for([text.title, text.summary, text.service or ""], text.tags)


class MemoryService(Recall):
    """Hybrid recall and event-sourced writes over one repository and one provider."""

    def __init__(
        self,
        repository: MemoryRepository,
        provider: EmbeddingProvider,
        *,
        topic_embed_timeout_s: float = 2.0,
        embed_queue: EmbedQueue | None = None,
        topology: ServiceScopes | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        previous_provider: EmbeddingProvider | None = None,
        reader: MemoryRepository | Callable[[], MemoryRepository] | None = None,
        reranker: Reranker | None = None,
        rerank_timeout_s: float = 1.0,
    ) -> None:
        self.reranker = reranker
        self.rerank_timeout_s = rerank_timeout_s
        self._cutoff_cache = {}
        self.repository = repository
        # where a query's searches run: a reader when reads scale out (AWS: the proxy's
        # read-only endpoint; a callable is asked at each search), else the one database;
        # writes always go to `repository`
        self._reader = reader
        # the embedding models: `provider`, and during a model change the previous one
        # tenants not yet switched are served from (one place holds both)
        self.blue_green = BlueGreen(repository, provider, previous_provider)
        self.topic_embed_timeout_s = topic_embed_timeout_s
        self.embed_queue = embed_queue
        self.topology = topology
        self.enqueue_failures = 0
        self._clock = clock

    @property
    def previous_provider(self) -> EmbeddingProvider | None:
        return self.blue_green.previous

    @property
    def reader(self) -> MemoryRepository:
        """The repository queries search."""
        if self._reader is None:
            return self.repository
        return self._reader if isinstance(self._reader, MemoryRepository) else self._reader()

    # -- writes ------------------------------------------------------------------------

    def record_entry(
        self, tenant_id: str, entry: NewEntry | dict[str, object], context: WriteContext
    ) -> WriteOutcome:
        """Create an entry (an incident's corroborated finding or an admin's entry)."""
        tenant = require_tenant(tenant_id)
        command = self._parse(NewEntry, entry)
        return self._after_commit(
            self.repository.create_entry(
                tenant, command, _tags(command), context, also=self._learned(tenant)
            )
        )

    def record_entries(
        self,
        tenant_id: str,
        items: Sequence[tuple[NewEntry | dict[str, object], WriteContext]],
        *,
        incident_services: Collection[str] = (),
        incident_at: datetime | None = None,
        verdicts: Sequence[VerdictWrite] = (),
    ) -> list[WriteOutcome]:
        """Several entries in one transaction (all or none), then one enqueue for their jobs.

        With the topology tier, the incidents of the entries created are recorded in its
        learned graph in the same transaction: each incident affects its entries'
        services plus `incident_services` (the incident's own), at `incident_at` (now
        without it). `verdicts` (an incident's outcomes on the entries it recalled) are
        recorded in it too, each once by its key, and then refit the organization's
        recalibration as any verdict does; an entry not the organization's is
        EntryNotFoundError, and nothing is stored. A redelivery creates no entry and
        records nothing.
        """
        tenant = require_tenant(tenant_id)
        commands = []
        for entry, context in items:
            command = self._parse(NewEntry, entry)
            commands.append((command, _tags(command), context))
        also = self._learned(tenant, incident_services, incident_at)
        outcomes = self._after_commit_all(
            self.repository.create_entries(
                tenant,
                commands,
                also=also,
                incident_services=incident_services,
                incident_at=incident_at,
                verdicts=verdicts,
            )
        )
        if verdicts:
            self._recalibrate(tenant)
        return outcomes

    def _learned(
        self,
        tenant: str,
        incident_services: Collection[str] = (),
        at: datetime | None = None,
    ) -> Callable[[Cursor, list[MemoryEntry]], None] | None:
        """The learned-graph write that runs inside an entry write's transaction."""
        topology = self.topology
        if topology is None:
            return None

        def record(cur: Cursor, created: list[MemoryEntry]) -> None:
            incidents: dict[str, set[str]] = {}
            for entry in created:
                if entry.incident_id is not None:
                    services = incidents.setdefault(entry.incident_id, set(incident_services))
                    if entry.service:
                        services.add(entry.service)
            if incidents:
                topology.record_incidents(cur, tenant, incidents, at or self._clock())

        return record

    def correct_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        text: EntryText | dict[str, object],
        context: WriteContext,
        *,
        expected_revision: int | None = None,
    ) -> WriteOutcome:
        """A new revision of the entry's text; it is re-embedded, the old vector dropped.
        Given as a mapping, a correction keeps every field it does not name (`service`
        named None clears it): the rest are the current revision's, which the correction
        then expects (a correction meanwhile is a conflict, never silently mixed in)."""
        tenant = require_tenant(tenant_id)
        if isinstance(text, dict):
            text, expected_revision = self._completed(tenant, entry_id, text, expected_revision)
        command = self._parse(EntryText, text)
        return self._after_commit(
            self.repository.correct_entry(
                tenant, entry_id, command, _tags(command), context, expected_revision
            )
        )

    def _completed(
        self,
        tenant: str,
        entry_id: UUID,
        named: dict[str, object],
        expected_revision: int | None,
    ) -> tuple[dict[str, object], int | None]:
        if not named.keys() & _CORRECTABLE:
            raise InvalidInputError(
                "body", f"a correction names at least one of {', '.join(sorted(_CORRECTABLE))}"
            )
        if named.keys() >= _CORRECTABLE:
            return named, expected_revision
        current = self.repository.get_entry(tenant, entry_id)
        if current.tags_unfilled:
            # tags kept from an entry stored before migration 0041 are its words, not the
            # stems a read shows until the backfill: filled first
            self.repository.fill_given_tags(tenant)
            current = self.repository.get_entry(tenant, entry_id)
        kept: dict[str, object] = {
            "title": current.title,
            "summary": current.summary,
            "service": current.service,
            "tags": current.tags,
        }
        expected = current.revision if expected_revision is None else expected_revision
        return {**kept, **named}, expected

    def retire_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        reason: str,
        context: WriteContext,
        *,
        superseded_by: UUID | None = None,
    ) -> WriteOutcome:
        tenant = require_tenant(tenant_id)
        return self.repository.retire_entry(
            tenant, entry_id, _reason(reason), context, superseded_by
        )

    def redact_entry(
        self,
        tenant_id: str,
        entry_id: UUID,
        reason: str,
        context: WriteContext,
        *,
        keep_recurrences: bool = False,
        also: object = None,
    ) -> RedactionOutcome:
        """Remove an entry's text for good (`grandbo.memory.repository.redaction`), and
        the strings listed in `also` (`log_quotes.listed_strings`) wherever the log or a
        note spells them."""
        tenant = require_tenant(tenant_id)
        listed = listed_strings(also)
        return self.repository.redact_entry(
            tenant,
            entry_id,
            _reason(reason),
            context,
            keep_recurrences=keep_recurrences,
            # the learned graph keys an incident's node by its id's digest: guessable
            forget_incidents=None if self.topology is None else self.topology.forget_incidents,
            also=listed,
        )

    def organization_rows(self, tenant_id: str) -> dict[str, int]:
        """The organization's rows in every tenant-scoped table (what a purge deletes)."""
        return self.repository.organization_rows(require_tenant(tenant_id))

    def purge_state(self, tenant_id: str) -> tuple[dict[str, int], int]:
        """What a purge would delete now, and the organization's latest event id."""
        tenant = require_tenant(tenant_id)
        return self.repository.organization_rows(tenant), self.repository.last_event_id(tenant)

    def purge_organization(self, tenant_id: str) -> dict[str, int]:
        """Delete every row of the organization, events and topology included, in one
        transaction; the rows deleted per table. Its cached cutoffs go with it."""
        tenant = require_tenant(tenant_id)
        deleted = self.repository.purge_organization(tenant)
        self._cutoff_cache = {k: v for k, v in self._cutoff_cache.items() if k[0] != tenant}
        return deleted

    def promote_entry(self, tenant_id: str, entry_id: UUID, context: WriteContext) -> WriteOutcome:
        """An episodic entry becomes durable (an event): it is kept until retired."""
        return self.repository.promote_entry(require_tenant(tenant_id), entry_id, context)

    def set_episodic_ttl_days(self, tenant_id: str, days: object) -> int:
        """How long the organization's new episodic entries are served (1-3650 days)."""
        if isinstance(days, bool) or not isinstance(days, int):
            raise InvalidInputError("episodic_ttl_days", "must be an integer number of days")
        if not 1 <= days <= MAX_EPISODIC_TTL_DAYS:
            raise InvalidInputError(
                "episodic_ttl_days", f"must be between 1 and {MAX_EPISODIC_TTL_DAYS} days"
            )
        self.repository.set_episodic_ttl_days(require_tenant(tenant_id), days)
        return days

    def set_min_confidence(self, tenant_id: str, floor: object) -> float | None:
        """The organization's confidence floor (0-1; None: the model's default). This
        container's queries use it at once; other containers within 5 minutes."""
        tenant = require_tenant(tenant_id)
        value = validate_min_confidence(floor)
        self.repository.set_min_confidence(tenant, value, DEFAULT_EPISODIC_TTL_DAYS)
        self.forget_query_settings(tenant)
        return value

    def forget_expired_retrievals(self, tenant_id: str | None = None) -> int:
        """Delete retrievals past their organization's retention (RETRIEVAL_DAYS unless it
        set its own), of one tenant or all; how many."""
        return sum(
            self.repository.forget_retrievals(tenant)
            for tenant in tenants_of(self.repository, tenant_id)
        )

    def query_rate(self, tenant_id: str) -> int:
        """Questions one caller of the organization may ask per minute: its own setting,
        read with the query's other settings (cached, no statement of its own), else
        QUERY_RATE_PER_MINUTE."""
        tenant = require_tenant(tenant_id)
        own = self._query_settings(tenant, self.serving_provider(tenant)).query_rate
        return own or QUERY_RATE_PER_MINUTE

    def set_log_bounds(
        self,
        tenant_id: str,
        *,
        query_rate_per_minute: object = None,
        retrieval_rows_per_day: object = None,
    ) -> None:
        """The organization's query rate per caller and minute, and its retrieval log's
        rows per day (each None: left as it is)."""
        rate = _bounded("query_rate_per_minute", query_rate_per_minute, MAX_QUERY_RATE_PER_MINUTE)
        rows = _bounded(
            "retrieval_rows_per_day", retrieval_rows_per_day, MAX_RETRIEVAL_ROWS_PER_DAY
        )
        self.repository.set_log_bounds(
            require_tenant(tenant_id), query_rate_per_minute=rate, retrieval_rows_per_day=rows
        )

    def remove_logged_question(
        self, tenant_id: str, retrieval_id: UUID, reason: str, context: WriteContext
    ) -> str:
        """One question deleted from the organization's retrieval log and the removal
        recorded (who, when, why, the topic's SHA-256); the digest. RetrievalNotFoundError
        where its log holds no such question (another organization's included)."""
        digest = self.repository.remove_retrieval(
            require_tenant(tenant_id), retrieval_id, context.actor, _reason(reason)
        )
        if digest is None:
            raise RetrievalNotFoundError(retrieval_id)
        return digest

    def remove_verdict_note(
        self, tenant_id: str, verdict_id: int, reason: str, context: WriteContext
    ) -> str:
        """One verdict's note removed (a secret quoted in it): the verdict stands and is
        still counted, its note reads REMOVED; who removed it, when, why and the note's
        SHA-256 are recorded (migration 0040); the digest. VerdictNotFoundError where the
        organization holds no verdict of that id with a note standing."""
        tenant = require_tenant(tenant_id)
        why = _reason(reason)
        if isinstance(verdict_id, bool) or not 1 <= verdict_id < 2**63:
            raise VerdictNotFoundError(verdict_id)
        digest = self.repository.remove_note(tenant, verdict_id, context.actor, why)
        if digest is None:
            raise VerdictNotFoundError(verdict_id)
        return digest

    def set_retrieval_days(self, tenant_id: str, days: object) -> int:
        """How long the organization keeps its retrieval log (1-3650 days)."""
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
            raise InvalidInputError("retrieval_days", "must be a whole number of days, 1 to 3650")
        self.repository.set_retrieval_days(require_tenant(tenant_id), days)
        return days

    def retire_expired(self, tenant_id: str | None = None, *, limit: int | None = None) -> int:
        """Retire (through an event, never a delete) active episodic entries past their
        expiry, of one tenant or all, at most `limit` in this call (the sweeper's share,
        so a backlog never starves the embed backfill that follows). Returns how many.
        An entry promoted meanwhile is left alone (rechecked under its row lock)."""
        now = self._clock()
        retired = 0
        for tenant in tenants_of(self.repository, tenant_id):
            tried: set[UUID] = set()
            while ids := [
                entry_id
                for entry_id in self.repository.expired_entry_ids(tenant, now)
                if entry_id not in tried  # a row no retirement changes (drift) is tried once
            ]:
                tried.update(ids)
                for entry_id in ids:
                    if limit is not None and retired >= limit:
                        return retired
                    key = idempotency_key(KeySpace.EXPIRY, str(entry_id))
                    try:
                        outcome = self.repository.retire_entry(
                            tenant,
                            entry_id,
                            "expired: an episodic entry past its lifetime",
                            WriteContext(actor="grandbo-sweeper", idempotency_key=key),
                            expired_by=now,
                        )
                    except EntryNotActiveError:  # an admin retired it meanwhile
                        continue
                    retired += int(outcome.applied)
        return retired

    def fill_given_tags(self, tenant_id: str | None = None) -> int:
        """Give entries stored before migration 0041 their tags as written (what a replay
        of their events spells back: `ProjectionRebuild.fill_given_tags`), of one tenant
        or all. Returns how many entries it filled."""
        return sum(
            self.repository.fill_given_tags(tenant)
            for tenant in tenants_of(self.repository, tenant_id)
        )

    def mark_title_tags(self, tenant_id: str | None = None, *, limit: int | None = None) -> int:
        """Fill the title flag of postings written before migration 0014 (ranked as body
        tags until then), of one tenant or all, at most `limit` entries. Returns how many."""
        marked = 0
        for tenant in tenants_of(self.repository, tenant_id):
            while limit is None or marked < limit:
                batch = TITLE_TAG_BATCH if limit is None else min(TITLE_TAG_BATCH, limit - marked)
                done = self.repository.mark_title_tags(tenant, batch)
                marked += done
                if done < batch:
                    break
        return marked

    def _after_commit(self, outcome: WriteOutcome) -> WriteOutcome:
        return self._after_commit_all([outcome])[0]

    def _after_commit_all(self, outcomes: list[WriteOutcome]) -> list[WriteOutcome]:
        """Enqueue the embed jobs of committed writes; a queue failure never fails a write."""
        applied = [o for o in outcomes if o.applied]
        if not applied or self.embed_queue is None:
            return outcomes
        jobs = [
            EmbedJob(
                tenant_id=o.entry.tenant_id, entry_id=o.entry.entry_id, revision=o.entry.revision
            )
            for o in applied
        ]
        try:
            self.embed_queue.send(jobs)
            enqueued = True
        except Exception:
            self.enqueue_failures += len(jobs)
            _log.exception(
                "%s embed job(s) not enqueued; the sweeper will embed entries %s",
                len(jobs),
                [str(job.entry_id) for job in jobs],
            )
            enqueued = False
        return [
            o.model_copy(update={"embed_enqueued": enqueued}) if o.applied else o for o in outcomes
        ]

    def record_feedback(
        self,
        tenant_id: str,
        entry_id: UUID,
        feedback: Feedback | dict[str, object],
        context: WriteContext,
    ) -> WriteOutcome:
        """Count an investigation's verdict on an entry (an event; a retry is a no-op)."""
        tenant = require_tenant(tenant_id)
        command = self._parse(Feedback, feedback)
        outcome = self.repository.record_feedback(tenant, entry_id, command, context)
        if outcome.applied:
            self._recalibrate(tenant)
        return outcome

    def _recalibrate(self, tenant: str, *, forget: bool = False) -> None:
        """Refit the organization's recalibration after a verdict
        (`grandbo.memory.domain.recalibration`), for the model it is served from: from
        its latest verdicts the retrieval log ties to a served hit, with the confidence
        served (mapped back through the recalibration in force), each source capped, none
        imported, removed or before the organization's epoch. Kept only once it has enough
        of them; with `forget` (a verdict was removed), the recalibration in force is
        dropped when what is left is not enough: it may have been fit from the verdict. A
        failure here never fails the verdict, which is recorded: the next one refits."""
        try:
            serving = self.serving_provider(tenant)
            # on the writer, as the fit's write: a verdict never waits on a reader
            reads = self.repository.query_reads(tenant, serving.embed_rev)
            model = self.serving_model(serving, reads.confidence_fit)
            current = reads.recalibration
            if current is not None and not current.fits(model.name):
                current = None  # fit for another model: its verdicts were served raw
            served = self.repository.served_verdicts(tenant, recalibration.MAX_VERDICTS, model.name)
            fitted = recalibration.fit(served, model.name, current)
            if (fitted is not None or (forget and current is not None)) and (
                self.repository.store_recalibration(tenant, fitted, DEFAULT_EPISODIC_TTL_DAYS)
            ):
                self.forget_query_settings(tenant)
        except GrandboError:
            _log.warning("recalibrating %s from its verdicts failed; the next one retries", tenant)

    def reset_recalibration(self, tenant_id: str) -> datetime:
        """Drop the organization's recalibration and start a new epoch: its confidence is
        the model's again, and every later fit ignores the verdicts recorded before now
        (and those on answers served before now), until enough new ones refit it. The
        epoch's moment."""
        tenant = require_tenant(tenant_id)
        epoch = self.repository.start_recalibration_epoch(tenant, DEFAULT_EPISODIC_TTL_DAYS)
        self.forget_query_settings(tenant)
        return epoch

    def remove_verdict(
        self, tenant_id: str, verdict_id: int, reason: str, context: WriteContext
    ) -> RemovedVerdict:
        """An admin removes a verdict (a flood's, a sender's it should not have trusted):
        an event of its own, recorded with who (the context's actor), when and why (a
        reason is required), the verdict uncounted from its entry; the next fit forgets it
        (refit now). VerdictNotFoundError where the organization holds no verdict of that
        id (another organization's included); a verdict removed before is answered as it
        was removed (`applied` false)."""
        tenant = require_tenant(tenant_id)
        why = _reason(reason)
        if isinstance(verdict_id, bool) or not 1 <= verdict_id < 2**63:
            raise VerdictNotFoundError(verdict_id)
        removed = self.repository.remove_verdict(tenant, verdict_id, why, context)
        if removed is None:
            raise VerdictNotFoundError(verdict_id)
        if removed.applied:
            self._recalibrate(tenant, forget=True)
        return removed

    def forget_query_settings(self, tenant: str) -> None:
        """Read the organization's query settings afresh at its next question (they changed)."""
        self._cutoff_cache = {k: v for k, v in self._cutoff_cache.items() if k[0] != tenant}

    def record_caller_feedback(
        self,
        tenant_id: str,
        entry_id: UUID,
        feedback: Feedback | dict[str, object],
        *,
        caller: str,
        own_key: str | None = None,
    ) -> WriteOutcome:
        """A caller's verdict, counted at most once per caller, entry and incident (as the
        domain reads them: a padded incident id is the same incident), whatever its
        verdict or Idempotency-Key: the first stands, and a key only makes a retry a no-op,
        as the verdict's own key already does. At most FEEDBACK_RATE verdicts per caller
        and window (RateLimitedError, a 429). The query API and the MCP server both record
        through here, as one actor per key (`query:<key id>`): the rate and the review
        list count the key, whichever door its verdicts came through."""
        command = self._parse(Feedback, feedback)
        if own_key is not None:
            caller_key(own_key)  # still checked: a malformed key is a 400 as before
        key = idempotency_key(
            KeySpace.QUERY, caller, "feedback", str(entry_id), command.incident_id
        )
        tenant = require_tenant(tenant_id)
        outcome = self.repository.record_feedback(
            tenant,
            entry_id,
            command,
            WriteContext(actor=f"query:{caller}", idempotency_key=key),
            rate=FEEDBACK_RATE,
        )
        if outcome.applied:
            self._recalibrate(tenant)
        return outcome

    def entries_for_review(self, tenant_id: str) -> list[MemoryEntry]:
        """Entries called misleading more than MISLEADING_REVIEW_THRESHOLD times."""
        return self.repository.entries_flagged_misleading(
            require_tenant(tenant_id), MISLEADING_REVIEW_THRESHOLD
        )

    def rebuild_learned_graph(self, tenant_id: str) -> dict[str, int] | None:
        """The topology tier's learned graph completed from the entry events' (incident,
        service) pairs: what entries written before it existed, with no topology tier, or
        by an import taught. Idempotent; None without the topology tier."""
        if self.topology is None:
            return None
        tenant = require_tenant(tenant_id)
        return self.topology.rebuild_learned(tenant, self.repository.incident_services(tenant))

    def verify_learned_graph(self, tenant_id: str) -> tuple[int, list[str]] | None:
        """How many (incident, service) pairs the entry events hold, and how the learned
        graph differs from them (`grandbo rebuild --verify`); None without the tier."""
        if self.topology is None:
            return None
        tenant = require_tenant(tenant_id)
        pairs = {(i, s) for i, s, _ in self.repository.incident_services(tenant)}
        return len(pairs), self.topology.verify_learned(tenant, pairs)

    def stale_entries(self, tenant_id: str) -> list[tuple[UUID, Staleness]]:
        """Active entries about a service the topology has retired or renamed, or whose
        named dependency is gone: for an admin to review (none without the topology)."""
        tenant = require_tenant(tenant_id)
        return stale_subjects(self.topology, tenant, self.repository.active_subjects(tenant))

    def get_entry(self, tenant_id: str, entry_id: UUID) -> MemoryEntry:
        """The entry; a redacted one is EntryRedactedError with its tombstone (a 410)."""
        tenant = require_tenant(tenant_id)
        entry = self.repository.get_entry(tenant, entry_id)
        if entry.status is EntryStatus.REDACTED:
            tombstone = self.repository.tombstone(tenant, entry_id)
            raise EntryRedactedError(
                entry_id, {} if tombstone is None else tombstone.model_dump(mode="json")
            )
        return entry

    @staticmethod
    def _parse(model: type[_Command], value: _Command | dict[str, object]) -> _Command:
        if isinstance(value, model):
            return value
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise invalid_input_from(exc) from exc
