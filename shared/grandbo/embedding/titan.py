"""Amazon Bedrock Titan Text Embeddings v2 (`amazon.titan-embed-text-v2:0`), 1024 dims."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from grandbo.embedding.base import EMBEDDING_DIMENSIONS, EmbeddingProvider
from grandbo.errors import EmbeddingError

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

TITAN_EMBED_V2 = "amazon.titan-embed-text-v2:0"
# Titan v2 accepts up to 50,000 characters (8,192 tokens) per request.
MAX_INPUT_CHARS = 50_000


class TitanEmbeddingProvider(EmbeddingProvider):
    """One `InvokeModel` call per text (Titan v2 has no batch request), normalized vectors."""

    model_id = TITAN_EMBED_V2
    # Not calibrated against Bedrock from this machine (no AWS access); Titan v2 normalized
    # vectors of related incident text sit well under this. Recalibrate with `grandbo eval`.
    vector_cutoff = 0.75
    # not measured either (the base's bounds, MiniLM's badly-wrong cutoffs widened): only
    # a calibration far outside what any sentence model needs is refused
    plausible_cutoffs = (0.3, 0.95)

    def __init__(
        self, client: BedrockRuntimeClient | None = None, *, model_id: str | None = None
    ) -> None:
        self._client = client
        if model_id is not None:  # another Titan embedding model of 1024 dimensions
            self.model_id = model_id

    @property
    def client(self) -> BedrockRuntimeClient:
        if self._client is None:
            from grandbo.aws_clients import client

            self._client = client("bedrock-runtime")
        return self._client

    def warm(self) -> None:
        """The Bedrock client made (boto3 imported, credentials resolved) during init:
        no model call, which would cost and could fail."""
        _ = self.client

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return [self._invoke(text) for text in texts]

    def _invoke(self, text: str) -> list[float]:
        body = json.dumps(
            {
                "inputText": text[:MAX_INPUT_CHARS],
                "dimensions": EMBEDDING_DIMENSIONS,
                "normalize": True,
            }
        )
        response = self.client.invoke_model(
            modelId=self.model_id,
            body=body,
            contentType="application/json",
            accept="application/json",
        )
        try:
            payload: Any = json.loads(response["body"].read())
            vector = payload["embedding"]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self.model_id} returned a malformed response: {exc}") from exc
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise EmbeddingError(f"{self.model_id} returned a malformed embedding")
        return [float(x) for x in vector]
