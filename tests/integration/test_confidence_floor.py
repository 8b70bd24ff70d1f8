"""Answers that say when memory knows nothing: confidence on every hit, the floor, and no
padding, on the demo lake with the real local model."""

from __future__ import annotations

from typing import Any

import pytest

from grandbo.errors import InvalidInputError
from grandbo.local.demo import seed_demo
from grandbo.memory.read.confidence.fitted import MINILM
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import context, entry, log_answer

PAYMENTS = "card payments fail with timeouts after the payments service deploy"
NOTHING_CLOSE = "the marketing team wants a new font for the quarterly newsletter layout"
CORE_DNS = "CoreDNS CPU throttling caused intermittent resolution timeouts"


@pytest.fixture
def demo(repository: MemoryRepository, local_provider: Any, tenant: str) -> MemoryService:
    service = MemoryService(repository, local_provider)
    seed_demo(service, tenant)
    service.embed_pending(tenant)
    return service


def test_an_unrelated_lesson_sharing_one_word_does_not_pad_the_answer(
    demo: MemoryService, tenant: str
) -> None:
    unfloored = demo.query_org_memory(tenant, PAYMENTS, min_confidence=0.0)
    padding = next(hit for hit in unfloored.hits if hit.title == CORE_DNS)
    assert padding.why.shared_words == ["timeouts"]  # one word in common, nothing else
    assert padding.confidence is not None
    assert padding.confidence < MINILM.default_floor

    answer = demo.query_org_memory(tenant, PAYMENTS)

    assert CORE_DNS not in [hit.title for hit in answer.hits]
    assert answer.hits, "the payments lesson is a precedent and is served"
    assert "payments" in answer.hits[0].why.shared_words
    assert all(hit.confidence >= MINILM.default_floor for hit in answer.hits)  # type: ignore[operator]
    assert answer.metadata.withheld == len(unfloored.hits) - len(answer.hits) >= 1
    assert answer.metadata.min_confidence == MINILM.default_floor
    assert answer.metadata.confidence_model == MINILM.name
    assert not answer.metadata.no_precedent
    # the same hits, in the same (fused) order, with the same confidence
    kept = [h for h in unfloored.hits if h.confidence >= MINILM.default_floor]  # type: ignore[operator]
    assert [(h.entry_id, h.confidence) for h in answer.hits] == [
        (h.entry_id, h.confidence) for h in kept
    ]


def test_a_topic_memory_holds_nothing_close_to_is_answered_empty_and_says_so(
    demo: MemoryService, tenant: str
) -> None:
    answer = demo.query_org_memory(tenant, NOTHING_CLOSE)
    assert answer.hits == []
    assert answer.metadata.no_precedent
    assert answer.metadata.message is not None
    assert "nothing close" in answer.metadata.message
    # a candidate existed: it was withheld, not missed
    assert demo.query_org_memory(tenant, NOTHING_CLOSE, min_confidence=0.0).hits


def test_confidence_is_absolute_a_weak_best_match_is_not_certain(
    demo: MemoryService, tenant: str
) -> None:
    hits = demo.query_org_memory(tenant, NOTHING_CLOSE, min_confidence=0.0).hits
    weak = max(hits, key=lambda hit: hit.why.fused_score)
    strong = demo.query_org_memory(
        tenant, "users are logged out because session keys vanish from redis"
    ).hits[0]
    # the best of its answer by the fusion's relative score, which reads near 1.0 anyway
    assert weak.why.fused_score > 0.9
    assert weak.confidence is not None
    assert strong.confidence is not None
    assert weak.confidence < 0.1 < 0.5 < strong.confidence


CONNECTION_LEAK = "Connection leak in payments retry path exhausted the RDS connection limit"


@pytest.mark.parametrize(
    "topic",
    [
        # the README's question in its detailed form and in its short forms (issue 50)
        "checkout requests are timing out and the payment service logs show it cannot get "
        "a database connection since the afternoon deploy",
        "payments cannot get a database connection and requests time out after a deploy",
        "payments cannot get a database connection",
    ],
)
def test_a_lesson_stays_possible_or_better_when_the_question_adds_true_detail(
    demo: MemoryService, tenant: str, topic: str
) -> None:
    hits = demo.query_org_memory(tenant, topic, min_confidence=0.0).hits
    by_title = {hit.title: hit.confidence or 0.0 for hit in hits}
    assert by_title[CONNECTION_LEAK] >= 0.1  # "possible" in the console's words
    # an unrelated lesson stays under it, and hits come in the order their confidence states
    assert all(c < 0.1 for t, c in by_title.items() if "RDS" not in t and "payments" not in t)
    confidences = [hit.confidence or 0.0 for hit in hits]
    assert confidences == sorted(confidences, reverse=True)


def test_the_floor_is_the_requests_else_the_organizations_else_the_models(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    for who in (tenant, other_tenant):
        for title, summary in (
            (
                "Checkout pool exhausted",
                "checkout requests waited for a free database connection from the pool",
            ),
            (
                "Banner colour wrong",
                "the homepage banner used an old brand palette again after the redesign",
            ),
        ):
            service.record_entry(who, entry(title, summary), context())
    service.embed_pending()
    topic = "checkout requests time out waiting for a database connection"
    everything = service.query_org_memory(tenant, topic)
    assert everything.metadata.min_confidence == 0.0  # the test double's model withholds nothing
    assert all(0.0 <= h.confidence <= 1.0 for h in everything.hits)  # type: ignore[operator]

    assert service.set_min_confidence(tenant, 1.0) == 1.0
    assert service.query_org_memory(tenant, topic).hits == []
    assert service.query_org_memory(tenant, topic).metadata.min_confidence == 1.0
    # another organization's floor is its own
    assert len(service.query_org_memory(other_tenant, topic).hits) == len(everything.hits)
    # a request's floor wins over the organization's
    assert len(service.query_org_memory(tenant, topic, min_confidence=0.0).hits) == len(
        everything.hits
    )
    assert service.set_min_confidence(tenant, None) is None
    assert len(service.query_org_memory(tenant, topic).hits) == len(everything.hits)


@pytest.mark.parametrize("bad", [-1, 1.5, float("nan"), "high", True])
def test_a_bad_floor_stores_nothing(service: MemoryService, tenant: str, bad: object) -> None:
    with pytest.raises(InvalidInputError) as refused:
        service.set_min_confidence(tenant, bad)
    assert refused.value.field == "min_confidence"
    with pytest.raises(InvalidInputError):
        service.query_org_memory(
            tenant,
            "checkout requests time out waiting for a database connection",
            min_confidence=bad,  # type: ignore[arg-type]
        )
    assert service.repository.query_reads(tenant, service.provider.embed_rev)[:4] == ((None,) * 4)


def test_an_organizations_verdicts_recalibrate_its_confidence_and_only_its_own(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    topic = "checkout requests time out waiting for a database connection"
    for who in (tenant, other_tenant):
        service.record_entry(
            who,
            entry(
                "Checkout pool exhausted",
                "checkout requests waited for a free database connection from the pool",
            ),
            context(),
        )
    service.embed_pending()
    hit = service.query_org_memory(tenant, topic).hits[0]
    before = hit.confidence
    assert before is not None
    # every investigation was served the confident hit and found it misleading, bar a few
    for n in range(40):
        log_answer(service, tenant, topic, incident_id=f"INC-{n}", caller=f"beacon-{n}")
        verdict = "helpful" if n % 8 == 0 else "misleading"
        service.record_caller_feedback(
            tenant,
            hit.entry_id,
            {"verdict": verdict, "incident_id": f"INC-{n}"},
            caller=f"beacon-{n}",
        )
        if n == 20:  # not enough verdicts yet: unchanged
            assert service.query_org_memory(tenant, topic).hits[0].confidence == before
    after = service.query_org_memory(tenant, topic).hits[0].confidence
    assert after is not None
    assert after < before
    theirs = service.query_org_memory(other_tenant, topic).hits[0].confidence
    assert theirs == before  # another organization's verdicts are its own


def test_a_served_confidence_out_of_range_is_refused_and_nothing_is_counted(
    service: MemoryService, tenant: str
) -> None:
    created = service.record_entry(
        tenant,
        entry(
            "Checkout pool exhausted",
            "checkout requests waited for a free database connection from the pool",
        ),
        context(),
    ).entry
    for bad in (1.5, -0.1, float("nan"), "0.5"):
        with pytest.raises(InvalidInputError) as refused:
            service.record_caller_feedback(
                tenant,
                created.entry_id,
                {"verdict": "helpful", "incident_id": "INC-1", "confidence": bad},
                caller="beacon",
            )
        assert refused.value.field == "confidence"
    assert service.get_entry(tenant, created.entry_id).feedback.helpful == 0
