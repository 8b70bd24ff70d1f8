"""The optional reranker (issue 13, item 4): Bedrock's Rerank API through botocore's
Stubber (the real client, its request validation included), and the service's fail-open
stage: a timeout, throttling or a malformed answer serves the fused order."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from grandbo.embedding.rerank import (
    BedrockReranker,
    Reranker,
    RerankError,
    checked_order,
    reranker_named,
)
from grandbo.errors import GrandboError
from grandbo.memory.domain.models import EntryStatus, MemoryEntry, Origin
from grandbo.memory.read.reranking import RERANK_DEPTH, rerank_entries

MODEL = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"


@pytest.fixture
def stubbed() -> Iterator[tuple[BedrockReranker, Stubber]]:
    client = boto3.client(
        "bedrock-agent-runtime",
        region_name="us-west-2",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield BedrockReranker(MODEL, client=client), stubber
        stubber.assert_no_pending_responses()


def _request(query: str, documents: Sequence[str]) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {
                "type": "INLINE",
                "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}},
            }
            for d in documents
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": len(documents),
                "modelConfiguration": {"modelArn": MODEL},
            },
        },
    }


def test_bedrock_orders_by_relevance(stubbed: tuple[BedrockReranker, Stubber]) -> None:
    reranker, stubber = stubbed
    docs = ["disk full on the primary", "pool exhausted by a leak", "certificate expired"]
    stubber.add_response(
        "rerank",
        {
            "results": [
                {"index": 1, "relevanceScore": 0.91},
                {"index": 2, "relevanceScore": 0.05},
                {"index": 0, "relevanceScore": 0.40},
            ]
        },
        _request("checkout pool timeouts", docs),
    )
    assert reranker.rerank("checkout pool timeouts", docs) == [1, 0, 2]


@pytest.mark.parametrize(
    ("code", "status"),
    [("ThrottlingException", 429), ("AccessDeniedException", 403), ("ValidationException", 400)],
)
def test_bedrock_errors_become_rerank_errors(
    stubbed: tuple[BedrockReranker, Stubber], code: str, status: int
) -> None:
    reranker, stubber = stubbed
    stubber.add_client_error("rerank", code, "no", http_status_code=status)
    with pytest.raises(RerankError, match=code):
        reranker.rerank("checkout pool timeouts", ["a document", "another one"])


@pytest.mark.parametrize(
    ("results", "problem"),
    [
        ([{"index": 0, "relevanceScore": 0.5}, {"index": 0, "relevanceScore": 0.4}], "twice"),
        ([{"index": 7, "relevanceScore": 0.5}], "out of range"),
        ([{"index": 0, "relevanceScore": float("nan")}], "non-finite"),
    ],
)
def test_malformed_answers_become_rerank_errors(  # those botocore's response model allows
    stubbed: tuple[BedrockReranker, Stubber], results: list[dict[str, Any]], problem: str
) -> None:
    reranker, stubber = stubbed
    stubber.add_response("rerank", {"results": results})
    with pytest.raises(RerankError, match=problem):
        reranker.rerank("checkout pool timeouts", ["a document", "another one"])


def test_the_spec_names_a_bedrock_model_or_nothing() -> None:
    assert reranker_named(None) is None
    assert reranker_named("off") is None
    named = reranker_named(f"bedrock:{MODEL}")
    assert isinstance(named, BedrockReranker)
    assert named.model_arn == MODEL
    for bad in ("bedrock", "bedrock:amazon.rerank-v1:0", "cohere", f"bedrock:{MODEL} x"):
        with pytest.raises(GrandboError, match="unknown reranker"):
            reranker_named(bad)


# -- the service's stage ----------------------------------------------------------------


def _entries(n: int) -> list[MemoryEntry]:
    now = datetime.now(UTC)
    return [
        MemoryEntry(
            tenant_id="acme",
            entry_id=uuid.uuid4(),
            title=f"entry {i}",
            summary=f"summary of entry {i}",
            tags=[],
            service=None,
            origin=Origin.ADMIN,
            status=EntryStatus.ACTIVE,
            revision=1,
            incident_id=None,
            superseded_by=None,
            created_at=now,
            updated_at=now,
            embed_rev=None,
            embedded_revision=None,
        )
        for i in range(n)
    ]


class Reversing(Reranker):
    name = "reversing"

    def __init__(self, delay_s: float = 0.0, answer: list[int] | None = None) -> None:
        self.delay_s = delay_s
        self.answer = answer
        self.seen: list[int] = []

    def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        self.seen.append(len(documents))
        time.sleep(self.delay_s)
        return self.answer if self.answer is not None else list(range(len(documents)))[::-1]


def test_the_fused_head_is_reordered_and_the_tail_kept() -> None:
    fused = _entries(RERANK_DEPTH + 3)
    reranker = Reversing()
    result = rerank_entries(reranker, "a topic", fused, timeout_s=1.0)
    assert result.status == "ok"
    assert reranker.seen == [RERANK_DEPTH]
    assert result.entries == fused[:RERANK_DEPTH][::-1] + fused[RERANK_DEPTH:]


def test_a_partial_answer_keeps_the_rest_in_fused_order() -> None:
    fused = _entries(4)
    result = rerank_entries(Reversing(answer=[2]), "a topic", fused, timeout_s=1.0)
    assert result.entries == [fused[2], fused[0], fused[1], fused[3]]


def test_a_slow_reranker_is_cut_at_the_deadline_and_the_fused_order_served() -> None:
    fused = _entries(5)
    started = time.perf_counter()
    result = rerank_entries(Reversing(delay_s=2.0), "a topic", fused, timeout_s=0.2)
    assert time.perf_counter() - started < 1.0
    assert (result.status, result.entries) == ("unavailable", fused)
    assert result.error is not None
    assert "timed out" in result.error


def test_a_failing_reranker_serves_the_fused_order(
    stubbed: tuple[BedrockReranker, Stubber],
) -> None:
    reranker, stubber = stubbed
    stubber.add_client_error("rerank", "ThrottlingException", "slow down", 429)
    fused = _entries(3)
    result = rerank_entries(reranker, "a topic", fused, timeout_s=2.0)
    assert (result.status, result.entries) == ("unavailable", fused)
    assert "ThrottlingException" in (result.error or "")


def test_no_reranker_is_off_and_changes_nothing() -> None:
    fused = _entries(3)
    assert rerank_entries(None, "a topic", fused, timeout_s=1.0).status == "off"
    assert rerank_entries(None, "a topic", fused, timeout_s=1.0).entries == fused


def test_hung_rerankers_never_pile_up_threads() -> None:
    release = threading.Event()

    class Hung(Reranker):
        name = "hung"

        def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
            release.wait(5)
            return []

    fused = _entries(3)
    before = threading.active_count()
    try:
        results = [rerank_entries(Hung(), "t", fused, timeout_s=0.01) for _ in range(20)]
        assert all(r.status == "unavailable" for r in results)
        assert threading.active_count() - before <= 8  # MAX_RERANK_THREADS
        assert any("still outstanding" in (r.error or "") for r in results)
    finally:
        release.set()


@pytest.mark.parametrize("indexes", [[-1], [True], ["0"], [0, 0], [3]])
def test_an_order_names_each_document_once(indexes: list[Any]) -> None:
    with pytest.raises(RerankError):
        checked_order(indexes, 3, source="test")
    assert checked_order([2, 0], 3, source="test") == [2, 0]


def test_a_deployment_names_its_reranker_in_the_environment() -> None:
    from pydantic import ValidationError

    from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime

    base = {"DATABASE_URL": "postgresql://x@localhost/db", "GRANDBO_EMBEDDING_PROVIDER": "fake"}
    assert LambdaRuntime(LambdaEnvironment.model_validate(base)).reranker is None
    configured = LambdaRuntime(
        LambdaEnvironment.model_validate(
            {**base, "GRANDBO_RERANKER": f"bedrock:{MODEL}", "GRANDBO_RERANK_TIMEOUT_S": "0.5"}
        )
    )
    assert isinstance(configured.reranker, BedrockReranker)
    assert configured.environment.rerank_timeout_s == 0.5
    for bad in ({"GRANDBO_RERANKER": "cohere"}, {"GRANDBO_RERANK_TIMEOUT_S": "0"}):
        with pytest.raises(ValidationError):
            LambdaEnvironment.model_validate({**base, **bad})


@pytest.mark.parametrize(
    "answer",
    [None, ["0", "1"], [0, 0, 1], [True, 0], [9], iter([]), "012"],
    ids=["none", "strings", "twice", "bool", "out-of-range", "generator", "a-string"],
)
def test_any_reranker_answer_is_checked_and_a_bad_one_serves_the_fused_order(
    answer: Any,
) -> None:
    class Misbehaving(Reranker):
        name = "misbehaving"

        def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
            return answer  # type: ignore[no-any-return]

    fused = _entries(3)
    result = rerank_entries(Misbehaving(), "a topic", fused, timeout_s=1.0)
    if answer is not None and not isinstance(answer, str) and list(answer) == []:
        assert result.status == "ok"  # an empty answer: the fused order, completed
    assert result.entries == fused
    assert result.status in ("ok", "unavailable")


@pytest.mark.parametrize("error", [ValueError("bug"), SystemExit(3)])
def test_a_reranker_raising_anything_serves_the_fused_order(error: BaseException) -> None:
    class Raising(Reranker):
        name = "raising"

        def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
            raise error

    fused = _entries(3)
    result = rerank_entries(Raising(), "a topic", fused, timeout_s=1.0)
    assert (result.status, result.entries) == ("unavailable", fused)


def test_hostile_specs_are_refused() -> None:
    for bad in (
        "bedrock:arn:aws-----:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0",
        "bedrock:arn:aws:bedrock:us-west-2:\u0661\u0662\u0663:foundation-model/amazon.rerank-v1:0",
        "bedrock:arn:aws:bedrock:nowhere::foundation-model/amazon.rerank-v1:0",
    ):
        with pytest.raises(GrandboError):
            reranker_named(bad)
