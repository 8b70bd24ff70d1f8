"""Embedding providers: the 1024 contract, Titan through botocore's Stubber, the local model."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from grandbo.embedding.base import (
    EMBEDDING_DIMENSIONS,
    TEXT_TEMPLATE_VERSION,
    check_embedding,
    render_entry_text,
)
from grandbo.embedding.factory import provider_named
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.embedding.titan import TITAN_EMBED_V2, TitanEmbeddingProvider
from grandbo.errors import EmbeddingError, GrandboError


def _unit(dims: int = EMBEDDING_DIMENSIONS) -> list[float]:
    return [1.0 / math.sqrt(dims)] * dims


@pytest.mark.parametrize(
    ("vector", "problem"),
    [
        ([0.1] * 1023, "1023 dimensions"),
        ([0.1] * 1025, "1025 dimensions"),
        ([float("nan")] + [0.1] * 1023, "non-finite"),
        ([float("inf")] + [0.1] * 1023, "non-finite"),
        ([0.0] * 1024, "zero vector"),
    ],
)
def test_contract_rejects_wrong_dimensions_non_finite_and_zero(
    vector: list[float], problem: str
) -> None:
    with pytest.raises(EmbeddingError, match=problem):
        check_embedding(vector, source="test")


def test_embed_rev_names_model_dimensions_and_template() -> None:
    provider = FakeEmbeddingProvider(model_id="m-1")
    assert provider.embed_rev == f"m-1|d{EMBEDDING_DIMENSIONS}|t{TEXT_TEMPLATE_VERSION}"


def test_entry_text_template_puts_title_service_then_summary() -> None:
    assert render_entry_text("T", "S", "svc") == "T\nservice: svc\nS"
    assert render_entry_text("T", "S", None) == "T\nS"


def test_fake_provider_is_deterministic_and_honours_pinned_vectors() -> None:
    pinned = _unit()
    provider = FakeEmbeddingProvider(pinned={"exact": pinned})
    first, second = provider.embed(["disk full on db", "disk full on db"])
    assert first == second
    assert provider.embed_one("exact") == pinned


def test_a_provider_failure_becomes_an_embedding_error() -> None:
    class Broken(FakeEmbeddingProvider):
        def _embed(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("socket closed")

    with pytest.raises(EmbeddingError, match="socket closed"):
        Broken().embed(["text"])


def test_unknown_provider_name_is_refused() -> None:
    for name in ("word2vec", "titan:", "titan:a b", "local:other", "TITAN"):
        with pytest.raises(GrandboError, match="unknown embedding provider"):
            provider_named(name)


def test_another_titan_model_is_a_provider_of_its_own_revision() -> None:
    # a model change names the model tenants are served from until they switch
    current = provider_named("titan")
    previous = provider_named("titan:amazon.titan-embed-text-v1:2")
    assert previous.model_id == "amazon.titan-embed-text-v1:2"
    assert previous.embed_rev != current.embed_rev
    assert current.model_id == "amazon.titan-embed-text-v2:0"


# -- Titan through botocore's Stubber -------------------------------------------------


def _titan() -> tuple[TitanEmbeddingProvider, Stubber]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return TitanEmbeddingProvider(client=client), Stubber(client)


def _body(payload: Any) -> dict[str, Any]:
    raw = json.dumps(payload).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def _expected(text: str) -> dict[str, Any]:
    return {
        "modelId": TITAN_EMBED_V2,
        "body": json.dumps({"inputText": text, "dimensions": 1024, "normalize": True}),
        "contentType": "application/json",
        "accept": "application/json",
    }


def test_titan_returns_the_1024_dimension_vector_per_text() -> None:
    provider, stubber = _titan()
    first, second = _unit(), [-x for x in _unit()]
    stubber.add_response("invoke_model", _body({"embedding": first}), _expected("one"))
    stubber.add_response("invoke_model", _body({"embedding": second}), _expected("two"))
    with stubber:
        assert provider.embed(["one", "two"]) == [first, second]
    stubber.assert_no_pending_responses()
    assert provider.embed_rev.startswith("amazon.titan-embed-text-v2:0|d1024")


def test_titan_throttling_raises_an_embedding_error() -> None:
    provider, stubber = _titan()
    stubber.add_client_error(
        "invoke_model", service_error_code="ThrottlingException", http_status_code=429
    )
    with stubber, pytest.raises(EmbeddingError, match="ThrottlingException"):
        provider.embed(["text"])


def test_titan_server_error_raises_an_embedding_error() -> None:
    provider, stubber = _titan()
    stubber.add_client_error(
        "invoke_model", service_error_code="InternalServerException", http_status_code=500
    )
    with stubber, pytest.raises(EmbeddingError):
        provider.embed(["text"])


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"vector": [0.1] * 1024}, "malformed response"),
        ({"embedding": "not a list"}, "malformed embedding"),
        ({"embedding": [True] * 1024}, "malformed embedding"),
        ({"embedding": [0.1] * 512}, "512 dimensions"),
        ({"embedding": [float("nan")] * 1024}, "non-finite"),
        ({"embedding": [0.0] * 1024}, "zero vector"),
    ],
)
def test_titan_malformed_responses_fail_loudly(payload: Any, problem: str) -> None:
    provider, stubber = _titan()
    stubber.add_response("invoke_model", _body(payload))
    with stubber, pytest.raises(EmbeddingError, match=problem):
        provider.embed(["text"])


def test_titan_non_json_body_fails_loudly() -> None:
    provider, stubber = _titan()
    raw = b"<html>gateway error</html>"
    stubber.add_response(
        "invoke_model",
        {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "text/html"},
    )
    with stubber, pytest.raises(EmbeddingError, match="malformed response"):
        provider.embed(["text"])


# -- the local MiniLM model --------------------------------------------------------------


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_local_model_is_1024_normalized_and_zero_padded(local_provider: Any) -> None:
    (vector,) = local_provider.embed(["database connection pool exhausted"])
    assert len(vector) == EMBEDDING_DIMENSIONS
    assert all(x == 0.0 for x in vector[384:])
    assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-4)


def test_local_model_places_paraphrases_closer_than_unrelated_text(local_provider: Any) -> None:
    query, paraphrase, unrelated = local_provider.embed(
        [
            "the service ran out of database connections",
            "all connections in the postgres pool were in use, new requests waited",
            "the marketing site banner image had the wrong colour",
        ]
    )
    assert _cosine(query, paraphrase) > _cosine(query, unrelated) + 0.2


def test_local_model_batches_give_the_same_vectors_as_single_calls(local_provider: Any) -> None:
    texts = ["short text", "a considerably longer text about kafka consumer lag " * 5]
    batched = local_provider.embed(texts)
    single = [local_provider.embed_one(t) for t in texts]
    for a, b in zip(batched, single, strict=True):
        assert _cosine(a, b) > 0.9999


def test_a_model_file_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    from grandbo.embedding.local import _verified

    tampered = tmp_path / "model.onnx"
    tampered.write_bytes(b"not the pinned model")
    with pytest.raises(EmbeddingError, match="sha256"):
        _verified(tampered, "0" * 64)


# -- loading before the first query (issue 43) -----------------------------------------------


def test_warming_the_local_model_loads_it_before_any_query() -> None:
    from grandbo.embedding.local import LocalMiniLMProvider

    provider = LocalMiniLMProvider()
    assert provider._session is None  # loads lazily

    provider.warm()

    assert provider._session is not None
    assert provider._single is not None


def test_warming_titan_makes_its_client_during_init(aws_credentials: None) -> None:
    provider = TitanEmbeddingProvider()
    assert provider._client is None

    provider.warm()  # no model call: botocore sends nothing until invoke_model

    assert provider._client is not None
    assert provider._client.meta.service_model.service_name == "bedrock-runtime"


class _Warming(FakeEmbeddingProvider):
    def __init__(self, fails: bool = False) -> None:
        super().__init__()
        self.warmed = 0
        self.fails = fails

    def warm(self) -> None:
        self.warmed += 1
        if self.fails:
            raise EmbeddingError("model file missing")


@pytest.mark.parametrize("in_lambda", [True, False])
def test_a_lambda_warms_its_provider_at_init_and_nothing_else_does(
    monkeypatch: pytest.MonkeyPatch, in_lambda: bool
) -> None:
    from grandbo.runtime.lambda_container import (
        LambdaEnvironment,
        LambdaRuntime,
        install_runtime,
        warm_at_init,
    )

    if in_lambda:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "grandbo-query")
    else:
        monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    provider = _Warming()
    environment = LambdaEnvironment.model_validate(
        {"DATABASE_URL": "postgresql://x@localhost/db", "GRANDBO_EMBEDDING_PROVIDER": "fake"}
    )
    install_runtime(LambdaRuntime(environment, provider=provider))
    try:
        warm_at_init()
    finally:
        install_runtime(None)
    assert provider.warmed == (1 if in_lambda else 0)


def test_a_provider_that_fails_to_warm_never_fails_the_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from grandbo.runtime.lambda_container import (
        LambdaEnvironment,
        LambdaRuntime,
        install_runtime,
        warm_at_init,
    )

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "grandbo-query")
    provider = _Warming(fails=True)
    environment = LambdaEnvironment.model_validate(
        {"DATABASE_URL": "postgresql://x@localhost/db", "GRANDBO_EMBEDDING_PROVIDER": "fake"}
    )
    install_runtime(LambdaRuntime(environment, provider=provider))
    try:
        warm_at_init()  # logged, not raised: the first query loads it, as before
    finally:
        install_runtime(None)
    assert provider.warmed == 1


def test_a_provider_that_cannot_warm_says_why_and_never_stops_its_server() -> None:
    failing = _Warming(fails=True)

    said = failing.warm_or_say()

    assert said == "EmbeddingError: model file missing"
    assert failing.warmed == 1
    assert _Warming().warm_or_say() is None


def test_a_padded_incident_id_is_logged_as_a_verdict_names_it() -> None:
    from grandbo.runtime.lambda_container import _check_incident_id

    assert _check_incident_id("  INC-PAD \t") == "INC-PAD"
    assert _check_incident_id(None) is None
