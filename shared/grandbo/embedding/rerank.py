"""Rerankers: order a query's fused candidates by a cross-encoder's relevance (seed 004).

Optional and off by default. `BedrockReranker` calls Amazon Bedrock's Rerank API
(`bedrock-agent-runtime`, e.g. `amazon.rerank-v1:0` or `cohere.rerank-v3-5:0`); locally
there is none: no pip package ships a cross-encoder's weights, and nothing downloads them
(README). The service applies a reranker under a hard timeout and falls back to the
fused order on any failure (`grandbo.memory.read.reranking`).
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from grandbo.errors import GrandboError

# `bedrock:<model ARN>`: a Bedrock reranking model, e.g.
# arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0
RERANKER_SPEC = (
    r"^bedrock:arn:aws(-[a-z]+)*:bedrock:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{0,12}:"
    r"[A-Za-z0-9./:_-]{1,200}$"
)
# Bedrock's Rerank API takes up to 1,000 sources; a query reranks at most its fused top 25
MAX_SOURCE_CHARS = 4_000


class RerankError(GrandboError):
    """The reranker failed or answered something unusable (the fused order stands)."""


class Reranker(ABC):
    """Relevance order of `documents` for `query`: indexes into `documents`, best first."""

    name: str

    @abstractmethod
    def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        """Every index of `documents` exactly once, most relevant first, or RerankError."""


def checked_order(indexes: Sequence[Any], count: int, *, source: str) -> list[int]:
    """`indexes` if it names each of `count` documents exactly once; RerankError if not.
    (An answer naming fewer is completed in its given order by the caller's fused order.)"""
    order: list[int] = []
    for index in indexes:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankError(f"{source} answered an index out of range: {index!r}")
        if index in order:
            raise RerankError(f"{source} answered index {index} twice")
        order.append(index)
    return order


class BedrockReranker(Reranker):
    """Amazon Bedrock's Rerank API with one model (its ARN)."""

    def __init__(self, model_arn: str, client: Any = None) -> None:
        self.model_arn = model_arn
        self.name = f"bedrock:{model_arn.rsplit('/', 1)[-1]}"
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from grandbo.aws_clients import client

            self._client = client("bedrock-agent-runtime")
        return self._client

    def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        if not documents:
            return []
        try:
            response = self.client.rerank(
                queries=[{"type": "TEXT", "textQuery": {"text": query}}],
                sources=[
                    {
                        "type": "INLINE",
                        "inlineDocumentSource": {
                            "type": "TEXT",
                            "textDocument": {"text": document[:MAX_SOURCE_CHARS]},
                        },
                    }
                    for document in documents
                ],
                rerankingConfiguration={
                    "type": "BEDROCK_RERANKING_MODEL",
                    "bedrockRerankingConfiguration": {
                        "numberOfResults": len(documents),
                        "modelConfiguration": {"modelArn": self.model_arn},
                    },
                },
            )
        except Exception as exc:  # throttling, access, validation, network: fail open
            raise RerankError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        results = response.get("results") if isinstance(response, dict) else None
        if not isinstance(results, list):
            raise RerankError(f"{self.name} answered without results")
        scored: list[tuple[float, Any]] = []
        for result in results:
            score = result.get("relevanceScore") if isinstance(result, dict) else None
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise RerankError(f"{self.name} answered a result without a relevance score")
            try:
                value = float(score)
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):
                raise RerankError(f"{self.name} answered a non-finite relevance score")
            scored.append((value, result.get("index")))
        scored.sort(key=lambda pair: -pair[0])  # stable: ties keep the answer's order
        return checked_order([index for _, index in scored], len(documents), source=self.name)


def reranker_named(spec: str | None) -> Reranker | None:
    """None (off, the default), or `bedrock:<model ARN>`."""
    if not spec or spec == "off":
        return None
    if not re.fullmatch(RERANKER_SPEC, spec):
        raise GrandboError(f"unknown reranker {spec!r}; use 'off' or 'bedrock:<model ARN>'")
    return BedrockReranker(spec.partition(":")[2])
