"""The service layer: `query_org_memory` (the one read seam) and the write commands.

Every caller (Beacon's tool, chat, the Edge Bridge, the CLI, the Lambdas) goes through
these methods; none of them knows SQL or which embedding provider answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar
from uuid import UUID

from pydantic import TypeAdapter, ValidationError

from grandbo.embedding.base import Embedding, EmbeddingProvider
from grandbo.embedding.rerank import Reranker
from grandbo.errors import (
    EmbeddingError,
    EntryNotActiveError,
    EntryRedactedError,
    InvalidInputError,
    invalid_input_from,
)
from grandbo.memory.calibration import Calibration
from grandbo.memory.deadline import DeadlineExceeded, call_with_deadline
from grandbo.memory.embed_queue import EmbedQueue
from grandbo.memory.embedding_jobs import EmbeddingJobs, tenants_of
from grandbo.memory.fusion import FusedRank, score_fusion
from grandbo.memory.idempotency import KeySpace, caller_key, idempotency_key
from grandbo.memory.models import (
    MAX_EPISODIC_TTL_DAYS,
    EmbedJob,
    EntryStatus,
    EntryText,
    Feedback,
    FeedbackRate,
    MatchExplanation,
    MemoryEntry,
    MemoryHit,
    MemoryQueryResult,
    NewEntry,
    QueryMetadata,
    RedactionOutcome,
    ServiceName,
    Staleness,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.reembed import BlueGreen
from grandbo.memory.repository import MemoryRepository, SearchLegs
from grandbo.memory.reranking import rerank_entries
from grandbo.memory.staleness import ServiceChanges, stale_subjects, with_staleness
from grandbo.memory.topic import validate_topic
from grandbo.storage.tenant_scope import Cursor
from grandbo.tenancy import require_tenant
from grandbo.text.rules import reject_unsafe_text
from grandbo.text.tags import tag_words, tags_for, tokenize

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


DEFAULT_LIMIT = 5
MAX_LIMIT = 25
LEG_LIMIT = 25
# Entries whose postings get their title flag per transaction (mark_title_tags)
TITLE_TAG_BATCH = 500
# An entry called misleading by more investigations than this is listed for admin review
# (feedback is shown on hits, never used to rank them until an evaluation shows it helps).
MISLEADING_REVIEW_THRESHOLD = 1
# One caller's verdicts per window: far above an investigation's (a few hits each, after
# it closes), far below a flood (2,411 in 20 s from one token, issue 24)
FEEDBACK_RATE = FeedbackRate(limit=120, window_s=300)
SERVICE_PATTERN_HINT = "letters, digits and . _ : / - (at most 120 characters)"

# Topic embeddings in flight at once, process-wide (each on its own thread; see _embed_topic)
MAX_TOPIC_EMBED_THREADS = 8
_TOPIC_EMBED_SLOTS = threading.BoundedSemaphore(MAX_TOPIC_EMBED_THREADS)

_SERVICE: TypeAdapter[str] = TypeAdapter(ServiceName)
_Command = TypeVar("_Command", NewEntry, EntryText, Feedback)


class ServiceScopes(ServiceChanges, Protocol):
    """What memory needs from the topology tier (passed in, not imported): a query's
    `scope`, the staleness of its hits, and the learned graph its incidents write."""

    def services_in_scope(
        self, tenant_id: str, service: str, scope: str, as_of: datetime | None = None
    ) -> list[str]:
        """The service plus the services its scope reaches (in the topology of `as_of`)."""
        ...

    def record_incidents(
        self, cur: Cursor, tenant_id: str, incidents: Mapping[str, Collection[str]], at: datetime
    ) -> dict[str, int]:
        """What incidents taught (their services), on the write's own transaction."""
        ...

    def rebuild_learned(
        self, tenant_id: str, pairs: Sequence[tuple[str, str, datetime]]
    ) -> dict[str, int]:
        """The learned graph completed from (incident, service, recorded at) pairs."""
        ...

    def verify_learned(self, tenant_id: str, pairs: Collection[tuple[str, str]]) -> list[str]:
        """How the learned graph differs from the (incident, service) pairs."""
        ...


@dataclass(frozen=True, slots=True)
class RankedCandidates:
    """The two legs and their fusion before slicing; the eval harness reads all three."""

    legs: SearchLegs
    fused: list[UUID]
    fused_scores: dict[UUID, float]
    fused_parts: dict[UUID, tuple[float, float]]  # each score's lexical and vector terms
    topic_tags: list[str]
    vector_error: str | None
    serving: EmbeddingProvider  # the model the tenant is served from
    vector_cutoff: float  # the tenant's calibrated cutoff, or the model's default

    @property
    def embed_rev(self) -> str:
        return self.serving.embed_rev


@dataclass(frozen=True, slots=True)
class Answer:
    """A query's answer, the ranking it was cut from, the topic and the limit it used."""

    result: MemoryQueryResult
    ranked: RankedCandidates
    topic: str
    limit: int


def fuse(legs: SearchLegs) -> list[FusedRank[UUID]]:
    """The legs' candidates fused by both signals of each (`grandbo.memory.fusion`)."""
    return score_fusion(
        [[c.entry_id for c in legs.lexical], [c.entry_id for c in legs.vector]],
        legs.lexical_scores,
        {entry_id: 1.0 - distance for entry_id, distance in legs.distances.items()},
    )


def validate_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInputError("limit", "must be an integer")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError("limit", f"must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def validate_service(service: object) -> str | None:
    if service is None:
        return None
    if not isinstance(service, str):
        raise InvalidInputError("service", "must be a string")
    try:
        return _SERVICE.validate_python(service)
    except ValidationError as exc:
        raise InvalidInputError("service", SERVICE_PATTERN_HINT) from exc


def validate_as_of(as_of: object) -> datetime | None:
    """A query's `as_of`: a moment with a time zone, in UTC."""
    if as_of is None:
        return None
    if not isinstance(as_of, datetime) or as_of.tzinfo is None:
        raise InvalidInputError("as_of", "must be a time with a zone (e.g. 2026-11-29T10:00:00Z)")
    try:
        return as_of.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError("as_of", "is out of the range of dates") from None


def _tags(text: EntryText) -> list[str]:
    """An entry's tags: its title, summary and service, plus the tags it was given."""
    return tags_for([text.title, text.summary, text.service or ""], text.tags)


class MemoryService(EmbeddingJobs, Calibration):
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

    def now(self) -> datetime:
        """The service's clock (injected in tests)."""
        return self._clock()

    # -- read --------------------------------------------------------------------------

    def query_org_memory(
        self,
        tenant_id: str,
        topic: str,
        *,
        limit: int = DEFAULT_LIMIT,
        service: str | None = None,
        scope: str | None = None,
        as_of: datetime | None = None,
    ) -> MemoryQueryResult:
        """Have we seen this before? Entries relevant to `topic`, best first, with reasons.

        `scope` widens a `service` filter through the topology: `blast_radius` adds the
        services that depend on it, `dependencies` the services it depends on (3 hops),
        `correlated` those that failed together with it in past incidents. `as_of` (an
        incident's start, say) reads the scope and each hit's `staleness` from the
        topology valid then.
        """
        return self.answer(
            tenant_id, topic, limit=limit, service=service, scope=scope, as_of=as_of
        ).result

    def answer(
        self,
        tenant_id: str,
        topic: str,
        *,
        limit: int = DEFAULT_LIMIT,
        service: str | None = None,
        scope: str | None = None,
        probe: Sequence[UUID] = (),
        as_of: datetime | None = None,
    ) -> Answer:
        """`query_org_memory`'s answer and the ranking behind it; with `probe`, the same
        search also reads those entries' own signals (`grandbo.memory.explanation`)."""
        tenant = require_tenant(tenant_id)
        text = validate_topic(topic)
        limit = validate_limit(limit)
        service = validate_service(service)
        as_of = validate_as_of(as_of)
        services = self._services_in_scope(tenant, service, scope, as_of)
        ranked = self.rank(tenant, text, services=services, probe=probe)
        legs = ranked.legs
        lexical = {c.entry_id: (rank, c) for rank, c in enumerate(legs.lexical, start=1)}
        vector = {c.entry_id: (rank, c) for rank, c in enumerate(legs.vector, start=1)}
        now = self._clock()
        words = tag_words(text)
        hits = []
        reranked = rerank_entries(
            self.reranker,
            text,
            [legs.entries[entry_id] for entry_id in ranked.fused],
            self.rerank_timeout_s,
        )
        lessons = self.collapse(tenant, reranked.entries, ranked.serving, limit)
        for lesson in lessons:
            entry = lesson.entry
            entry_id = entry.entry_id
            lex = lexical.get(entry_id)
            vec = vector.get(entry_id)
            hits.append(
                MemoryHit(
                    entry_id=entry.entry_id,
                    title=entry.title,
                    summary=entry.summary,
                    tags=entry.tags,
                    service=entry.service,
                    origin=entry.origin,
                    revision=entry.revision,
                    incident_id=entry.incident_id,
                    created_at=entry.created_at,
                    updated_at=entry.updated_at,
                    age_days=round((now - entry.created_at).total_seconds() / 86400, 2),
                    kind=entry.kind,
                    expires_at=entry.expires_at,
                    feedback=entry.feedback,
                    recurrences=lesson.recurrences,
                    last_seen_at=lesson.last_seen_at,
                    also_seen_in=lesson.also_seen_in,
                    collapsed=[e.entry_id for e in lesson.collapsed],
                    why=MatchExplanation(
                        lexical_rank=None if lex is None else lex[0],
                        # a candidate only the vector leg listed still has the BM25 its
                        # fused score counts (`grandbo.memory.fusion`)
                        lexical_score=None
                        if (bm25 := legs.lexical_scores.get(entry_id)) is None
                        else round(bm25, 4),
                        shared_tags=legs.shared_tags.get(entry_id, []),
                        shared_words=[
                            words.get(tag, tag) for tag in legs.shared_tags.get(entry_id, [])
                        ],
                        vector_rank=None if vec is None else vec[0],
                        vector_distance=None if vec is None else round(vec[1].distance, 4),
                        fused_score=round(ranked.fused_scores[entry_id], 6),
                        lexical_part=round(ranked.fused_parts[entry_id][0], 6),
                        vector_part=round(ranked.fused_parts[entry_id][1], 6),
                    ),
                )
            )
        metadata = QueryMetadata(
            topic_tags=ranked.topic_tags,
            lexical_candidates=len(legs.lexical),
            vector_candidates=len(legs.vector),
            vector_leg="unavailable" if ranked.vector_error else "ok",
            vector_leg_error=ranked.vector_error,
            embed_rev=ranked.embed_rev,
            vector_cutoff=ranked.vector_cutoff,
            active_entries=legs.active_entries,
            active_entries_without_current_vector=legs.active_without_current_vector,
            services_in_scope=services,
            as_of=as_of,
            reranker=reranked.status,
            reranker_error=reranked.error,
        )
        hits = with_staleness(self.topology, tenant, hits, as_of)
        return Answer(MemoryQueryResult(hits=hits, metadata=metadata), ranked, text, limit)

    def _services_in_scope(
        self, tenant: str, service: str | None, scope: str | None, as_of: datetime | None
    ) -> list[str] | None:
        if scope is None or scope == "service":
            return None if service is None else [service]
        if service is None:
            raise InvalidInputError("scope", "widens a service filter: send a service too")
        if self.topology is None:
            raise InvalidInputError("scope", "the topology tier is not configured")
        return self.topology.services_in_scope(tenant, service, scope, as_of)

    def rank(
        self,
        tenant_id: str,
        topic: str,
        *,
        services: list[str] | None = None,
        use_lexical: bool = True,
        use_vector: bool = True,
        probe: Sequence[UUID] = (),
    ) -> RankedCandidates:
        """Both legs (top LEG_LIMIT each) and their fusion (`grandbo.memory.fusion`), unsliced;
        with `probe`, those entries' own signals too (`SearchLegs.probes`)."""
        topic_tags = tokenize(topic)
        serving = self.serving_provider(tenant_id)
        vector: Embedding | None = None
        vector_error: str | None = None
        if use_vector:
            vector, vector_error = self._embed_topic(topic, serving)
        cutoff = self.vector_cutoff(tenant_id, serving)
        legs = self.reader.search(
            tenant_id,
            topic_tags=topic_tags if use_lexical else [],
            topic_vector=vector,
            embed_rev=serving.embed_rev,
            vector_cutoff=cutoff,
            services=services,
            leg_limit=LEG_LIMIT,
            # an episodic entry past its expiry is not served, even before the sweeper
            now=self._clock(),
            probe=probe,
        )
        if legs.active_without_current_vector and self.blue_green.switched_since(
            tenant_id, serving
        ):  # the tenant switched models while this query embedded its topic: once more
            return self.rank(
                tenant_id,
                topic,
                services=services,
                use_lexical=use_lexical,
                use_vector=use_vector,
                probe=probe,
            )
        fused = fuse(legs)
        return RankedCandidates(
            legs=legs,
            fused=[f.key for f in fused],
            fused_scores={f.key: f.score for f in fused},
            fused_parts={f.key: f.parts for f in fused},
            topic_tags=topic_tags,
            vector_error=vector_error,
            serving=serving,
            vector_cutoff=cutoff,
        )

    def _embed_topic(
        self, topic: str, provider: EmbeddingProvider
    ) -> tuple[Embedding | None, str | None]:
        try:
            vector = call_with_deadline(
                lambda: provider.embed_one(topic),
                self.topic_embed_timeout_s,
                _TOPIC_EMBED_SLOTS,
                what="embedding the topic",
                outstanding=MAX_TOPIC_EMBED_THREADS,
                thread_name="grandbo-topic-embed",
            )
            return vector, None
        except DeadlineExceeded as exc:
            reason = str(exc)
        except EmbeddingError as exc:
            reason = f"embedding the topic failed: {exc}"
        _log.warning("vector leg unavailable, answering from tags only: %s", reason)
        return None, reason

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
    ) -> list[WriteOutcome]:
        """Several entries in one transaction (all or none), then one enqueue for their jobs.

        With the topology tier, the incidents of the entries created are recorded in its
        learned graph in the same transaction: each incident affects its entries'
        services plus `incident_services` (the incident's own), at `incident_at` (now
        without it). A redelivery creates no entry and records nothing.
        """
        tenant = require_tenant(tenant_id)
        commands = []
        for entry, context in items:
            command = self._parse(NewEntry, entry)
            commands.append((command, _tags(command), context))
        also = self._learned(tenant, incident_services, incident_at)
        return self._after_commit_all(self.repository.create_entries(tenant, commands, also=also))

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
        """A new revision of the entry's text; it is re-embedded, the old vector dropped."""
        tenant = require_tenant(tenant_id)
        command = self._parse(EntryText, text)
        return self._after_commit(
            self.repository.correct_entry(
                tenant, entry_id, command, _tags(command), context, expected_revision
            )
        )

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
    ) -> RedactionOutcome:
        """Remove an entry's text for good (`grandbo.memory.repository.redaction`)."""
        tenant = require_tenant(tenant_id)
        return self.repository.redact_entry(
            tenant, entry_id, _reason(reason), context, keep_recurrences=keep_recurrences
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
        return self.repository.record_feedback(tenant, entry_id, command, context)

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
        return self.repository.record_feedback(
            tenant,
            entry_id,
            command,
            WriteContext(actor=f"query:{caller}", idempotency_key=key),
            rate=FEEDBACK_RATE,
        )

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
