"""Recall: `query_org_memory`, the one read seam, and the ranking behind it.

The topic is validated and embedded (within a deadline, on a bounded pool of threads), the
organization's two legs searched in one call (`MemoryRepository.search`), the candidates
fused by both signals (`grandbo.memory.domain.fusion`), reranked when a reranker is configured,
collapsed into lessons, explained, and marked with what the topology says changed under
them (`grandbo.memory.read.staleness`). A base of `MemoryService`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from pydantic import TypeAdapter, ValidationError

from grandbo.embedding.base import Embedding, EmbeddingProvider
from grandbo.embedding.rerank import Reranker
from grandbo.errors import EmbeddingError, InvalidInputError
from grandbo.memory.domain.fusion import FusedRank, score_fusion
from grandbo.memory.domain.models import (
    MatchExplanation,
    MemoryHit,
    MemoryQueryResult,
    QueryMetadata,
    ServiceName,
)
from grandbo.memory.domain.topic import validate_topic
from grandbo.memory.read.confidence.fitted import keyword_model_for, model_for
from grandbo.memory.read.confidence.model import ConfidenceModel
from grandbo.memory.read.confidence.regime import Searched, score, searched
from grandbo.memory.read.confidence.serving import (
    degraded,
    reaches,
    validate_min_confidence,
    withholding,
)
from grandbo.memory.read.deadline import DeadlineExceeded, call_with_deadline
from grandbo.memory.read.reranking import rerank_entries
from grandbo.memory.read.staleness import ServiceChanges, with_staleness
from grandbo.memory.repository import MemoryRepository, SearchLegs
from grandbo.memory.vectors.cutoff import Calibration
from grandbo.memory.vectors.embedding_jobs import EmbeddingJobs
from grandbo.storage.tenant_scope import Cursor
from grandbo.tenancy import require_tenant
from grandbo.text.tags import tag_words, tokenize

_log = logging.getLogger(__name__)

DEFAULT_LIMIT = 5
MAX_LIMIT = 25
LEG_LIMIT = 25
SERVICE_PATTERN_HINT = "letters, digits and . _ : / - (at most 120 characters)"

# Topic embeddings in flight at once, process-wide (each on its own thread; see _embed_topic)
MAX_TOPIC_EMBED_THREADS = 8
_TOPIC_EMBED_SLOTS = threading.BoundedSemaphore(MAX_TOPIC_EMBED_THREADS)

_SERVICE: TypeAdapter[str] = TypeAdapter(ServiceName)


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

    def forget_incidents(
        self,
        cur: Cursor,
        tenant_id: str,
        incident_ids: Sequence[str],
        still_named: Callable[[Cursor, str, list[str]], set[str]],
    ) -> None:
        """The learned graph's nodes of those incidents no event names any more (a
        redaction removed the last one: `still_named`, asked under their locks) no
        longer findable by their ids, on the redaction's transaction."""
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
    # every candidate's confidence, and the candidates in the order served: by confidence
    # where the serving model's fit ranks (`ConfidenceModel.ranks`), else `fused`
    confidence: dict[UUID, float]
    ordered: list[UUID]
    # what the search could see (`grandbo.memory.read.confidence.regime`), and the candidates
    # the meaning leg could not compare (scored by the keyword model)
    searched: Searched = Searched.COMPLETE
    by_keywords: frozenset[UUID] = frozenset()

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
    """The legs' candidates fused by both signals of each (`grandbo.memory.domain.fusion`)."""
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


class Recall(EmbeddingJobs, Calibration):
    """The read side of `MemoryService` (which sets these in its constructor)."""

    reranker: Reranker | None
    rerank_timeout_s: float
    topic_embed_timeout_s: float
    topology: ServiceScopes | None

    def confidence_model(
        self, provider: EmbeddingProvider, tenant_id: str | None = None
    ) -> ConfidenceModel:
        """The confidence model for `provider`'s vectors (`grandbo.memory.read.confidence`):
        the shipped fit where it was measured on this model (MiniLM); else, for
        `tenant_id`, the model fitted from its own lake once it has one
        (`grandbo.memory.lifecycle.confidence_fit`), until then the shipped default."""
        if tenant_id is None or model_for(provider).measured:
            return model_for(provider)
        return self.serving_model(provider, self.organization_confidence_fit(tenant_id, provider))

    @staticmethod
    def serving_model(
        provider: EmbeddingProvider, fitted: dict[str, Any] | None
    ) -> ConfidenceModel:
        """The model that serves `provider`'s answers, given the organization's lake fit
        as stored (None: none yet): the shipped one where it was measured or no fit exists."""
        shipped = model_for(provider)
        return shipped if shipped.measured or fitted is None else ConfidenceModel.from_dict(fitted)

    def keyword_model(
        self, provider: EmbeddingProvider, tenant_id: str | None = None
    ) -> ConfidenceModel:
        """The model that scores what the keyword leg alone found (`regime`)."""
        fitted = tenant_id is not None and self.confidence_model(provider, tenant_id).measured
        return keyword_model_for(provider, lake_fitted=fitted)

    def confidence_floor(
        self,
        tenant_id: str,
        provider: EmbeddingProvider,
        model: ConfidenceModel,
        requested: float | None = None,
    ) -> float:
        """The floor in force: the request's, else the organization's, else the model's."""
        if requested is not None:
            return requested
        organization = self.organization_floor(tenant_id, provider)
        return model.default_floor if organization is None else organization

    def scored(
        self,
        tenant_id: str,
        order: Sequence[UUID],
        legs: SearchLegs,
        topic_tags: Sequence[str],
        cutoff: float,
        serving: EmbeddingProvider,
        *,
        topic_embedded: bool,
        model: ConfidenceModel | None = None,
    ) -> tuple[Searched, dict[UUID, float], frozenset[UUID]]:
        """The regime of a search and each candidate's confidence in it (the organization's
        recalibration applied to what the provider's model scored): what `rank` serves and
        the evaluation measures (with `model`, another model's: one fitted from the lake
        the evaluation loaded)."""
        regime = searched(
            topic_embedded=topic_embedded,
            active_entries=legs.active_entries,
            without_vector=legs.active_without_current_vector,
        )
        model = model or self.confidence_model(serving, tenant_id)
        keywords = self.keyword_model(serving, tenant_id)
        result = score(order, legs, topic_tags, cutoff, regime, model, keywords)
        confidence = result.confidence
        own = self.organization_recalibration(tenant_id, serving)
        if own is not None and own.fits(model.name):  # its verdicts recalibrated it
            confidence = {
                entry_id: p if entry_id in result.by_keywords else own.apply(p)
                for entry_id, p in confidence.items()
            }
        return regime, confidence, result.by_keywords

    def now(self) -> datetime:
        """The service's clock (injected in tests)."""
        return self._clock()

    @property
    def reader(self) -> MemoryRepository:
        """The repository queries search (MemoryService's: a reader when reads scale out)."""
        return self.repository

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
        min_confidence: float | None = None,
    ) -> MemoryQueryResult:
        """Have we seen this before? Entries relevant to `topic`, best first, with reasons.

        `scope` widens a `service` filter through the topology: `blast_radius` adds the
        services that depend on it, `dependencies` the services it depends on (3 hops),
        `correlated` those that failed together with it in past incidents. `as_of` (an
        incident's start, say) reads the scope and each hit's `staleness` from the
        topology valid then.

        Every hit carries its `confidence` (`grandbo.memory.read.confidence`); a candidate under
        the floor (`min_confidence`, else the organization's, else the model's) is withheld,
        and an answer with no hit says that memory holds nothing close.
        """
        return self.answer(
            tenant_id,
            topic,
            limit=limit,
            service=service,
            scope=scope,
            as_of=as_of,
            min_confidence=min_confidence,
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
        min_confidence: float | None = None,
    ) -> Answer:
        """`query_org_memory`'s answer and the ranking behind it; with `probe`, the same
        search also reads those entries' own signals (`grandbo.memory.read.explanation`)."""
        tenant = require_tenant(tenant_id)
        text = validate_topic(topic)
        limit = validate_limit(limit)
        service = validate_service(service)
        as_of = validate_as_of(as_of)
        requested_floor = validate_min_confidence(min_confidence)
        services = self._services_in_scope(tenant, service, scope, as_of)
        ranked = self.rank(tenant, text, services=services, probe=probe)
        legs = ranked.legs
        model = self.confidence_model(ranked.serving, tenant)
        floor = self.confidence_floor(tenant, ranked.serving, model, requested_floor)
        keywords = self.keyword_model(ranked.serving, tenant)
        # a candidate the meaning leg could not see is held to its own model's floor
        keyword_floor = self.confidence_floor(tenant, ranked.serving, keywords, requested_floor)
        confidence = ranked.confidence
        lexical = {c.entry_id: (rank, c) for rank, c in enumerate(legs.lexical, start=1)}
        vector = {c.entry_id: (rank, c) for rank, c in enumerate(legs.vector, start=1)}
        now = self._clock()
        words = tag_words(text)
        hits = []
        # the floor first, then the limit: the hits are the best `limit` of the candidates
        # that reach it (a candidate at the floor as shown, to 4 places, reaches it)
        withheld = {
            i
            for i in ranked.ordered
            if not reaches(confidence[i], keyword_floor if i in ranked.by_keywords else floor)
        }
        reranked = rerank_entries(
            self.reranker,
            text,
            [legs.entries[i] for i in ranked.ordered if i not in withheld],
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
                    confidence=round(confidence[entry_id], 4),
                    title=entry.title,
                    summary=entry.summary,
                    tags=entry.tags,
                    index_tags=entry.index_tags,
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
                        # fused score counts (`grandbo.memory.domain.fusion`)
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
                        confidence_model=(
                            keywords if entry_id in ranked.by_keywords else model
                        ).name,
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
            **withholding(
                keywords if ranked.searched is Searched.KEYWORDS_ONLY else model,
                keyword_floor if ranked.searched is Searched.KEYWORDS_ONLY else floor,
                # those the first `limit` candidates would have shown without the floor
                sum(1 for i in ranked.ordered[:limit] if i in withheld),
                max((confidence[i] for i in withheld), default=None),
                hits,
                regime=ranked.searched,
                degraded_note=degraded(
                    ranked.searched,
                    vector_error=ranked.vector_error,
                    active=legs.active_entries,
                    without_vector=legs.active_without_current_vector,
                    floor=floor,
                    served=bool(hits),
                ),
            ),
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
        """Both legs (top LEG_LIMIT each) and their fusion (`grandbo.memory.domain.fusion`),
        unsliced; with `probe`, those entries' own signals too (`SearchLegs.probes`)."""
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
        order = [f.key for f in fused]
        model = self.confidence_model(serving, tenant_id)
        regime, confidence, by_keywords = self.scored(
            tenant_id, order, legs, topic_tags, cutoff, serving, topic_embedded=vector is not None
        )
        return RankedCandidates(
            searched=regime,
            by_keywords=by_keywords,
            legs=legs,
            fused=order,
            confidence=confidence,
            ordered=model.order(order, confidence) if model.ranks else order,
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
