"""An answer says only what it knows (issue 43, point 1): when meaning search cannot run or
cannot see every entry, the keyword leg's match is served, scored by the keyword model,
and the answer says what could not be searched; "no precedent" is never said then.

On the demo lake with the real local model: the topic's embedding past its deadline, an
embedder that fails, entries not embedded yet (all of them, and one among embedded ones).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from grandbo.embedding.base import EmbeddingProvider
from grandbo.errors import EmbeddingError
from grandbo.local.demo import seed_demo
from grandbo.memory.domain.models import MemoryQueryResult
from grandbo.memory.read.confidence.fitted import KEYWORDS, MINILM
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import context, entry

# shares "expired", "intermediate", "certificate", "TLS" with the demo's certificate lesson
CERTIFICATE = "an expired intermediate certificate broke TLS handshakes for older clients"
CERTIFICATE_LESSON = "Expired intermediate certificate broke TLS for older clients"
# no word in common with any demo lesson
NOTHING_CLOSE = "the marketing team wants another font for the quarterly newsletter layout"


class _Unavailable(EmbeddingProvider):
    """The local model's identity (its stored vectors stay current), with a topic
    embedding that fails (Bedrock throttled) or takes longer than any deadline."""

    def __init__(self, local: EmbeddingProvider, *, slow_s: float | None = None) -> None:
        self.model_id = local.model_id
        self.vector_cutoff = local.vector_cutoff
        self.duplicate_distance = local.duplicate_distance
        self.plausible_cutoffs = local.plausible_cutoffs
        self._slow_s = slow_s

    def _embed(self, texts: list[str]) -> Sequence[Sequence[float]]:
        if self._slow_s is not None:
            time.sleep(self._slow_s)
        raise EmbeddingError("ThrottlingException: rate exceeded")


def _keyword_only(answer: MemoryQueryResult, why: str) -> None:
    meta = answer.metadata
    assert meta.searched == "keywords_only"
    assert meta.degraded is not None
    assert why in meta.degraded
    assert "keyword matches only" in meta.degraded
    assert meta.confidence_model == KEYWORDS.name
    assert not meta.no_precedent


@pytest.fixture
def embedded(repository: MemoryRepository, local_provider: Any, tenant: str) -> MemoryService:
    service = MemoryService(repository, local_provider)
    seed_demo(service, tenant)
    service.embed_pending(tenant)
    return service


def test_a_complete_search_serves_the_lesson_by_the_provider_model(
    embedded: MemoryService, tenant: str
) -> None:
    answer = embedded.query_org_memory(tenant, CERTIFICATE)

    assert answer.metadata.searched == "complete"
    assert answer.metadata.degraded is None
    assert answer.metadata.confidence_model == MINILM.name
    assert answer.hits[0].title == CERTIFICATE_LESSON


def test_a_topic_past_its_deadline_is_answered_from_keywords_and_says_so(
    embedded: MemoryService, repository: MemoryRepository, tenant: str, local_provider: Any
) -> None:
    slow = MemoryService(
        repository, _Unavailable(local_provider, slow_s=0.5), topic_embed_timeout_s=0.05
    )

    answer = slow.query_org_memory(tenant, CERTIFICATE)

    _keyword_only(answer, "timed out after 0.05s")
    assert answer.metadata.vector_leg == "unavailable"
    assert answer.hits[0].title == CERTIFICATE_LESSON
    assert answer.hits[0].confidence is not None
    assert answer.hits[0].confidence >= KEYWORDS.default_floor


def test_an_embedder_error_is_answered_from_keywords_and_says_so(
    embedded: MemoryService, repository: MemoryRepository, tenant: str, local_provider: Any
) -> None:
    failing = MemoryService(repository, _Unavailable(local_provider))

    answer = failing.query_org_memory(tenant, CERTIFICATE)

    _keyword_only(answer, "ThrottlingException")
    assert answer.hits[0].title == CERTIFICATE_LESSON


def test_a_degraded_search_that_finds_nothing_never_says_no_precedent(
    embedded: MemoryService, repository: MemoryRepository, tenant: str, local_provider: Any
) -> None:
    failing = MemoryService(repository, _Unavailable(local_provider))

    answer = failing.query_org_memory(tenant, NOTHING_CLOSE)
    complete = embedded.query_org_memory(tenant, NOTHING_CLOSE)

    assert not answer.hits
    assert answer.metadata.lexical_candidates == 0
    assert not answer.metadata.no_precedent
    assert answer.metadata.message is not None
    assert "not evidence that memory holds no precedent" in answer.metadata.message
    assert "Investigate it as new" not in answer.metadata.message
    # the same question searched completely may say it
    assert not complete.hits
    assert complete.metadata.no_precedent


def test_entries_not_embedded_yet_are_served_by_their_keywords(
    repository: MemoryRepository, local_provider: Any, tenant: str
) -> None:
    service = MemoryService(repository, local_provider)
    seed_demo(service, tenant)  # written, the embed worker not yet through

    answer = service.query_org_memory(tenant, CERTIFICATE)

    _keyword_only(answer, "no active entry has a vector of the current model yet")
    assert answer.metadata.vector_leg == "ok"  # the topic was embedded: nothing to compare
    assert answer.hits[0].title == CERTIFICATE_LESSON

    service.embed_pending(tenant)
    assert service.query_org_memory(tenant, CERTIFICATE).metadata.searched == "complete"


def test_one_entry_not_embedded_among_embedded_ones_is_searched_by_keywords(
    embedded: MemoryService, tenant: str
) -> None:
    written = embedded.record_entry(
        tenant,
        entry(
            "Kafka consumer group stuck after partition reassignment on orders-events",
            "A partition reassignment left the orders-events consumer group without an "
            "owner for three partitions; lag grew for an hour until the group was "
            "restarted. Reassignments now run with the consumer paused.",
        ),
        context(),
    )

    answer = embedded.query_org_memory(
        tenant, "orders-events consumer group stuck after a partition reassignment"
    )

    meta = answer.metadata
    assert meta.searched == "partial"
    assert meta.degraded is not None
    assert f"1 of {meta.active_entries} active entries" in meta.degraded
    assert not meta.no_precedent
    new = next(hit for hit in answer.hits if hit.entry_id == written.entry.entry_id)
    assert new.why.vector_distance is None  # found by its keywords alone
    assert new.confidence is not None
    assert new.confidence >= KEYWORDS.default_floor
