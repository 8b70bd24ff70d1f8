"""query_org_memory on the real database: both legs, the cutoff, fusion, fallbacks."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import InvalidInputError, InvalidTopicError
from grandbo.memory.domain.models import EmbedJob
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import at_distance, context, direction, entry

TOPIC = "requests to checkout time out waiting for a free database connection"
# an entry sharing six of its tags with TOPIC (entries below the minimum content are refused)
POOL = "checkout requests were waiting for a database connection from the pool"


def _add(memory: MemoryService, tenant: str, title: str, summary: str, **extra: Any) -> Any:
    return memory.record_entry(tenant, entry(title, summary, **extra), context()).entry


def test_write_then_query_round_trip(service: MemoryService, tenant: str) -> None:
    pool = _add(
        service,
        tenant,
        "Checkout connection pool exhausted",
        "checkout requests queued waiting for a database connection from PgBouncer",
        service="checkout-api",
    )
    _add(
        service,
        tenant,
        "Banner colour wrong",
        "The marketing banner on the homepage used the old brand palette after a redesign",
    )
    service.embed_pending(tenant)

    result = service.query_org_memory(tenant, TOPIC)

    assert result.hits[0].entry_id == pool.entry_id
    assert result.hits[0].service == "checkout-api"
    assert result.hits[0].why.lexical_rank == 1
    assert {"checkout", "connect", "databas"} <= set(result.hits[0].why.shared_tags)
    assert result.metadata.vector_leg == "ok"
    assert result.metadata.active_entries == 2
    assert result.metadata.active_entries_without_current_vector == 0
    assert "verify" in result.notice


def test_a_differently_worded_entry_is_found_by_the_vector_leg_only(
    repository: MemoryRepository, local_provider: Any, tenant: str
) -> None:
    service = MemoryService(repository, local_provider)
    pool = _add(
        service,
        tenant,
        "PgBouncer saturation",
        "All PgBouncer server slots were busy so new sessions waited in line until clients "
        "gave up.",
    )
    _add(
        service,
        tenant,
        "Marketing banner colour",
        "The homepage banner image used last year's brand palette.",
    )
    service.embed_pending(tenant)

    topic = "the app cannot obtain a postgres connection and user requests hang"
    # the floor off: this is about the vector leg (a paraphrase sharing no word scores a
    # low confidence on MiniLM's fit, which the default floor withholds: docs/EVAL.md)
    result = service.query_org_memory(tenant, topic, min_confidence=0.0)

    assert [hit.entry_id for hit in result.hits] == [pool.entry_id]
    assert result.hits[0].confidence is not None
    assert 0.0 < result.hits[0].confidence < 1.0
    why = result.hits[0].why
    assert why.lexical_rank is None  # no shared tag at all
    assert why.vector_rank == 1
    assert why.vector_distance is not None
    assert why.vector_distance < local_provider.vector_cutoff


def test_an_exact_identifier_is_found_by_the_lexical_leg(
    service: MemoryService, tenant: str
) -> None:
    target = _add(
        service,
        tenant,
        "Expired intermediate on edge-proxy-eu",
        "Clients failed the TLS handshake on edge-proxy-eu until the bundle was replaced.",
    )
    _add(service, tenant, "Edge proxy restart", "The proxy fleet restarted after a config push.")
    result = service.query_org_memory(
        tenant, "TLS handshakes are failing on edge-proxy-eu for older Android clients"
    )
    assert result.hits[0].entry_id == target.entry_id
    assert "edge-proxy-eu" in result.hits[0].why.shared_tags
    assert result.metadata.vector_candidates == 0  # nothing embedded: lexical carried it


def _pinned_service(repository: MemoryRepository, vectors: dict[str, list[float]]) -> Any:
    return MemoryService(repository, FakeEmbeddingProvider(pinned=vectors))


def test_the_cutoff_keeps_an_unrelated_entry_out(repository: MemoryRepository, tenant: str) -> None:
    cutoff = FakeEmbeddingProvider.vector_cutoff
    near_summary = "Near summary of a related finding, pinned close to the topic"
    far_summary = "Far summary of an unrelated finding, pinned beyond the cutoff"
    near_text, far_text = f"Near title\n{near_summary}", f"Far title\n{far_summary}"
    service = _pinned_service(
        repository,
        {
            TOPIC: direction((0, 1.0)),
            near_text: at_distance(cutoff - 0.1),
            far_text: at_distance(cutoff + 0.05),
        },
    )
    near = _add(service, tenant, "Near title", near_summary)
    _add(service, tenant, "Far title", far_summary)
    service.embed_pending(tenant)

    result = service.query_org_memory(tenant, TOPIC)

    assert [hit.entry_id for hit in result.hits] == [near.entry_id]
    assert result.metadata.vector_candidates == 1
    assert result.metadata.active_entries == 2


def test_slicing_happens_after_fusion(repository: MemoryRepository, tenant: str) -> None:
    """An entry 6th in both legs but strong on both signals wins the fused top 5 over each
    leg's top 5 (which are strong on one signal only)."""
    topic = "kafka consumer lag grew after the broker upgrade rebalance storm"
    texts: dict[str, list[float]] = {topic: direction((0, 1.0))}
    lexical_only = [
        (f"Lexical {i}", f"kafka consumer lag after the upgrade of item{i} lasted for hours")
        for i in range(5)
    ]
    vector_only = [
        (f"Vector {i}", f"unrelated words zebra{i} giraffe{i} okapi{i} lemur{i} tapir{i} walrus{i}")
        for i in range(5)
    ]
    # shares 3 of the lexical entries' 4 topic tags, 0.2 from the topic
    both_text = ("Both legs", "kafka consumer lag mentioned with filler words ocelot lynx puma")
    for i, (title, summary) in enumerate(lexical_only):
        # share 4 topic tags: high BM25; vectors opposite the topic, far beyond the cutoff
        texts[f"{title}\n{summary}"] = direction((0, -1.0), (i + 10, 0.1))
    for i, (title, summary) in enumerate(vector_only):
        # share no tags; vectors nearest to the topic
        texts[f"{title}\n{summary}"] = at_distance(0.05 + 0.01 * i, axis=i + 20)
    texts["\n".join(both_text)] = at_distance(0.2, axis=30)
    service = _pinned_service(repository, texts)
    for title, summary in [*lexical_only, *vector_only]:
        _add(service, tenant, title, summary)
    both = _add(service, tenant, *both_text)
    service.embed_pending(tenant)

    ranked = service.rank(tenant, topic)
    lexical_ids = [c.entry_id for c in ranked.legs.lexical]
    vector_ids = [c.entry_id for c in ranked.legs.vector]
    assert lexical_ids.index(both.entry_id) == 5  # 6th lexically
    assert vector_ids.index(both.entry_id) == 5  # 6th by vector

    result = service.query_org_memory(tenant, topic, limit=5)

    assert result.hits[0].entry_id == both.entry_id
    assert result.hits[0].why.lexical_rank == 6
    assert result.hits[0].why.vector_rank == 6
    assert len(result.hits) == 5


def test_every_candidate_is_scored_on_both_legs(repository: MemoryRepository, tenant: str) -> None:
    """A candidate one leg found gets the other leg's signal too (its distance beyond the
    cutoff; no BM25 where it shares no tag), and the fused score mixes both."""
    from grandbo.memory.domain.fusion import LEXICAL_WEIGHT as W

    cutoff = FakeEmbeddingProvider.vector_cutoff
    tagged = ("Checkout pool exhausted", POOL)
    near = ("Near title", "Near summary of a related finding, pinned close to the topic")
    service = _pinned_service(
        repository,
        {
            TOPIC: direction((0, 1.0)),
            "\n".join(tagged): at_distance(cutoff + 0.1),  # lexical leg only
            "\n".join(near): at_distance(0.1, axis=2),  # vector leg only
        },
    )
    lexical_only = _add(service, tenant, *tagged)
    vector_only = _add(service, tenant, *near)
    service.embed_pending(tenant)

    ranked = service.rank(tenant, TOPIC)

    assert [c.entry_id for c in ranked.legs.lexical] == [lexical_only.entry_id]
    assert [c.entry_id for c in ranked.legs.vector] == [vector_only.entry_id]
    assert ranked.legs.distances[lexical_only.entry_id] == pytest.approx(cutoff + 0.1, abs=1e-3)
    assert vector_only.entry_id not in ranked.legs.lexical_scores  # shares no tag
    similarity = {lexical_only.entry_id: 0.9 - cutoff, vector_only.entry_id: 0.9}
    assert ranked.fused_scores[lexical_only.entry_id] == pytest.approx(
        W + (1 - W) * similarity[lexical_only.entry_id] / 0.9, abs=1e-3
    )
    assert ranked.fused_scores[vector_only.entry_id] == pytest.approx(1 - W, abs=1e-3)
    assert ranked.fused == [lexical_only.entry_id, vector_only.entry_id]


def test_a_hit_explains_the_tags_its_score_counts_though_the_tag_leg_did_not_list_it(
    repository: MemoryRepository, tenant: str
) -> None:
    """30 entries outrank it on tags, so only the vector leg lists it; its fused score still
    counts its BM25, and `why` says so (shared tags and score, no lexical rank)."""
    topic = "kafka consumer lag grew after the broker upgrade rebalance storm"
    texts: dict[str, list[float]] = {topic: direction((0, 1.0))}
    strong = [
        (f"Incident number {i}", f"kafka consumer lag broker upgrade filler{i} words{i} here{i}")
        for i in range(30)
    ]
    weak = ("Kafka consumer lag", "noticed by walrus okapi tapir lemur giraffe zebra")
    for i, (title, summary) in enumerate(strong):
        texts[f"{title}\n{summary}"] = direction((0, -1.0), (i + 10, 0.1))
    texts["\n".join(weak)] = at_distance(0.05)
    service = _pinned_service(repository, texts)
    for title, summary in strong:
        _add(service, tenant, title, summary)
    target = _add(service, tenant, *weak)
    service.embed_pending(tenant)

    hit = next(
        h
        for h in service.query_org_memory(tenant, topic, limit=25).hits
        if h.entry_id == target.entry_id
    )

    assert hit.why.lexical_rank is None
    assert hit.why.vector_rank == 1
    assert set(hit.why.shared_tags) == {"kafka", "consum", "lag"}
    assert hit.why.lexical_score is not None
    assert hit.why.lexical_score > 0


def test_a_stale_embed_rev_is_excluded_from_the_vector_leg(
    repository: MemoryRepository, tenant: str
) -> None:
    old = MemoryService(repository, FakeEmbeddingProvider(model_id="model-v1"))
    new = MemoryService(repository, FakeEmbeddingProvider(model_id="model-v2"))
    stored = _add(
        old,
        tenant,
        "Disk full on db",
        "The database volume filled with WAL files and writes failed",
    )
    old.embed_pending(tenant)
    topic = "the database volume filled up with WAL files and writes failed"

    assert new.query_org_memory(tenant, topic).metadata.vector_candidates == 0
    assert new.query_org_memory(tenant, topic).metadata.active_entries_without_current_vector == 1
    assert [job.entry_id for job in new.pending_jobs(tenant)] == [stored.entry_id]

    new.embed_pending(tenant)
    result = new.query_org_memory(tenant, topic)
    assert result.metadata.vector_candidates == 1
    assert result.metadata.active_entries_without_current_vector == 0


def test_the_revision_guard_refuses_a_stale_vector(
    service: MemoryService, repository: MemoryRepository, tenant: str
) -> None:
    original = "Original summary of the finding as first written, before an admin corrected it"
    created = _add(service, tenant, "Original title", original)
    corrected = "Corrected summary text that replaces the original wording of the finding"
    service.correct_entry(tenant, created.entry_id, entry("New title", corrected), context())
    embed_rev = service.provider.embed_rev
    stale = service.provider.embed_one(f"Original title\n{original}")

    assert repository.store_embeddings(tenant, embed_rev, [(created.entry_id, 1, stale)]) == 0
    assert (
        service.embed_jobs([EmbedJob(tenant_id=tenant, entry_id=created.entry_id, revision=1)]) == 0
    )
    assert repository.get_entry(tenant, created.entry_id).embedded_revision is None
    assert (
        service.embed_jobs([EmbedJob(tenant_id=tenant, entry_id=created.entry_id, revision=2)]) == 1
    )
    again = EmbedJob(tenant_id=tenant, entry_id=created.entry_id, revision=2)
    assert service.embed_jobs([again]) == 0  # redelivered job: already current, no-op
    assert repository.get_entry(tenant, created.entry_id).embedded_revision == 2


def test_retired_entries_are_never_returned(service: MemoryService, tenant: str) -> None:
    created = _add(service, tenant, "Checkout pool", POOL)
    service.embed_pending(tenant)
    service.retire_entry(tenant, created.entry_id, "wrong root cause", context())
    result = service.query_org_memory(tenant, TOPIC)
    assert result.hits == []
    assert result.metadata.active_entries == 0


def test_service_filter_limits_both_legs(service: MemoryService, tenant: str) -> None:
    a = _add(service, tenant, "Checkout pool", POOL, service="checkout")
    _add(service, tenant, "Payments pool", POOL, service="payments")
    service.embed_pending(tenant)
    result = service.query_org_memory(tenant, TOPIC, service="checkout")
    assert [hit.entry_id for hit in result.hits] == [a.entry_id]


def test_a_service_scope_counts_coverage_within_the_scope(
    service: MemoryService, tenant: str
) -> None:
    _add(service, tenant, "Checkout pool", POOL, service="checkout")
    _add(service, tenant, "Payments pool", POOL, service="payments")
    service.embed_pending(tenant)
    _add(service, tenant, "Checkout again", POOL, service="checkout")
    scoped = service.query_org_memory(tenant, TOPIC, service="checkout").metadata
    assert (scoped.active_entries, scoped.active_entries_without_current_vector) == (2, 1)
    whole = service.query_org_memory(tenant, TOPIC).metadata
    assert (whole.active_entries, whole.active_entries_without_current_vector) == (3, 1)


def test_lexical_scores_are_okapi_bm25_over_tag_sets(service: MemoryService, tenant: str) -> None:
    """The leg's scores equal BM25 computed here from the stored tags: tf is 1, or
    TITLE_TAG_TF for a tag the entry's title carries (field weighting)."""
    import math

    from grandbo.memory.repository import BM25_B, BM25_K1
    from grandbo.memory.repository.postings import TITLE_TAG_TF
    from grandbo.text.tags import tokenize

    texts = [
        (
            "Checkout pool exhausted",
            "database connection pool exhausted on checkout after a deploy doubled workers",
        ),
        ("Checkout timeouts", "requests to checkout time out during deploys while pods restart"),
        ("Free connection wait", "waiting for a free connection from the pool took seconds"),
        ("DNS failure", "coredns was throttled by its CPU limit, so lookups failed"),
        ("Checkout database failover", "database failover made checkout requests wait a minute"),
    ]
    stored = [_add(service, tenant, title, summary) for title, summary in texts]
    topic_tags = set(tokenize(TOPIC))
    n = len(stored)
    avgdl = sum(len(set(e.index_tags)) for e in stored) / n
    df = {t: sum(t in e.index_tags for e in stored) for t in topic_tags}
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items() if d}
    expected = {}
    for e in stored:
        shared = topic_tags & set(e.index_tags)
        titled = set(tokenize(e.title))
        if shared:
            norm = BM25_K1 * (1 - BM25_B + BM25_B * len(set(e.index_tags)) / avgdl)
            tf = {t: TITLE_TAG_TF if t in titled else 1.0 for t in shared}
            expected[e.entry_id] = sum(
                idf[t] * tf[t] * (BM25_K1 + 1) / (tf[t] + norm) for t in shared
            )

    legs = service.rank(tenant, TOPIC).legs
    got = {c.entry_id: c.score for c in legs.lexical}
    assert got.keys() == expected.keys()
    for entry_id, score in expected.items():
        assert got[entry_id] == pytest.approx(score, rel=1e-9)
    assert [c.score for c in legs.lexical] == sorted(got.values(), reverse=True)
    for candidate in legs.lexical:  # shared tags listed rarest (heaviest) first
        weights = [idf[t] for t in candidate.shared_tags]
        assert weights == sorted(weights, reverse=True)
        held = legs.entries[candidate.entry_id].index_tags
        assert set(candidate.shared_tags) == topic_tags & set(held)


def test_when_the_topic_cannot_be_embedded_the_lexical_leg_answers(
    repository: MemoryRepository, tenant: str
) -> None:
    class Down(FakeEmbeddingProvider):
        def _embed(self, texts: list[str]) -> list[list[float]]:
            raise ConnectionError("bedrock unreachable")

    writer = MemoryService(repository, FakeEmbeddingProvider())
    created = _add(writer, tenant, "Checkout pool", POOL)
    writer.embed_pending(tenant)

    result = MemoryService(repository, Down()).query_org_memory(tenant, TOPIC)

    assert [hit.entry_id for hit in result.hits] == [created.entry_id]
    assert result.metadata.vector_leg == "unavailable"
    assert result.metadata.vector_leg_error is not None
    assert "bedrock unreachable" in result.metadata.vector_leg_error


def test_a_hung_provider_times_out_into_the_lexical_leg(
    repository: MemoryRepository, tenant: str
) -> None:
    class Hung(FakeEmbeddingProvider):
        def _embed(self, texts: list[str]) -> list[list[float]]:
            time.sleep(1.0)
            return super()._embed(texts)

    writer = MemoryService(repository, FakeEmbeddingProvider())
    _add(writer, tenant, "Checkout pool", POOL)
    service = MemoryService(repository, Hung(), topic_embed_timeout_s=0.1)

    started = time.perf_counter()
    result = service.query_org_memory(tenant, TOPIC)

    assert time.perf_counter() - started < 0.9
    assert len(result.hits) == 1
    assert result.metadata.vector_leg_error is not None
    assert "timed out" in result.metadata.vector_leg_error


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"topic": "checkout-api-slow-queries"}, "topic"),
        ({"topic": TOPIC, "limit": 0}, "limit"),
        ({"topic": TOPIC, "limit": 26}, "limit"),
        ({"topic": TOPIC, "limit": "5"}, "limit"),
        ({"topic": TOPIC, "service": "no spaces allowed"}, "service"),
    ],
)
def test_bad_queries_name_the_field(
    service: MemoryService, tenant: str, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError) as error:
        service.query_org_memory(tenant, **kwargs)
    assert error.value.field == field


def test_a_slug_topic_is_rejected_with_guidance(service: MemoryService, tenant: str) -> None:
    with pytest.raises(InvalidTopicError, match="describing what has been found"):
        service.query_org_memory(tenant, "checkout-api-slow-queries")


def test_limit_caps_the_fused_list(service: MemoryService, tenant: str) -> None:
    # eight different lessons about checkout's pool (entries saying one thing would be
    # collapsed into one hit: test_consolidation)
    causes = ["leak", "resize", "failover", "timeout", "exhaustion", "dns", "tls", "deploy"]
    for cause in causes:
        _add(service, tenant, f"Checkout pool {cause}", f"{POOL}, this time by a {cause}")
    service.embed_pending(tenant)
    assert len(service.query_org_memory(tenant, TOPIC).hits) == 5
    assert len(service.query_org_memory(tenant, TOPIC, limit=8).hits) == 8


def test_oldest_pending_age_measures_the_longest_wait(service: MemoryService, tenant: str) -> None:
    assert service.oldest_pending_age_s(tenant) == 0.0
    _add(
        service,
        tenant,
        "Waiting entry",
        "An entry that has no vector yet, waiting for the embed worker to run",
    )
    assert service.oldest_pending_age_s(tenant) >= 0.0
    later = MemoryService(
        service.repository,
        service.provider,
        clock=lambda: datetime.now(UTC) + timedelta(hours=1),
    )
    assert 3500 < later.oldest_pending_age_s(tenant) < 3700
    service.embed_pending(tenant)
    assert later.oldest_pending_age_s(tenant) == 0.0


def test_a_hung_embedding_never_delays_the_next_query(
    repository: MemoryRepository, tenant: str
) -> None:
    class SlowOnce(FakeEmbeddingProvider):
        def __init__(self) -> None:
            super().__init__()
            self.first = True

        def _embed(self, texts: list[str]) -> list[list[float]]:
            if self.first:
                self.first = False
                time.sleep(1.5)
            return super()._embed(texts)

    writer = MemoryService(repository, FakeEmbeddingProvider())
    _add(writer, tenant, "Checkout pool", POOL)
    writer.embed_pending(tenant)
    service = MemoryService(repository, SlowOnce(), topic_embed_timeout_s=0.2)
    assert service.query_org_memory(tenant, TOPIC).metadata.vector_leg == "unavailable"
    # the hung call is still sleeping: the next query embeds on its own thread at once
    assert service.query_org_memory(tenant, TOPIC).metadata.vector_leg == "ok"


def test_a_configured_reranker_reorders_the_hits_and_says_so(
    repository: MemoryRepository, tenant: str
) -> None:
    from collections.abc import Sequence

    from grandbo.embedding.fake import FakeEmbeddingProvider
    from grandbo.embedding.rerank import Reranker

    class Reversing(Reranker):
        name = "reversing"

        def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
            return list(range(len(documents)))[::-1]

    plain = MemoryService(repository, FakeEmbeddingProvider())
    for cause in ("leak", "resize", "failover"):
        _add(plain, tenant, f"Checkout pool {cause}", f"{POOL}, this time by a {cause}")
    plain.embed_pending(tenant)
    fused = plain.query_org_memory(tenant, TOPIC)
    assert fused.metadata.reranker == "off"
    reranked = MemoryService(repository, FakeEmbeddingProvider(), reranker=Reversing())
    answer = reranked.query_org_memory(tenant, TOPIC)
    assert answer.metadata.reranker == "ok"
    assert [h.entry_id for h in answer.hits] == [h.entry_id for h in fused.hits][::-1]
