"""Choose the embedding provider by configuration: production and local differ only here."""

from __future__ import annotations

from grandbo.embedding.base import EmbeddingProvider
from grandbo.errors import GrandboError


def provider_named(name: str) -> EmbeddingProvider:
    """`local` (MiniLM ONNX, the default), `titan` (Bedrock) or `fake` (tests only)."""
    if name == "local":
        from grandbo.embedding.local import LocalMiniLMProvider

        return LocalMiniLMProvider()
    if name == "titan":
        from grandbo.embedding.titan import TitanEmbeddingProvider

        return TitanEmbeddingProvider()
    if name == "fake":
        from grandbo.embedding.fake import FakeEmbeddingProvider

        return FakeEmbeddingProvider()
    raise GrandboError(f"unknown embedding provider {name!r}; use 'local', 'titan' or 'fake'")
