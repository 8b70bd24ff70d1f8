"""Choose the embedding provider by configuration: production and local differ only here."""

from __future__ import annotations

import re

from grandbo.embedding.base import EmbeddingProvider
from grandbo.errors import GrandboError

# `local`, `fake`, `titan`, or `titan:<Bedrock model id>` (another Titan model: a model
# change's previous or next one)
PROVIDER_SPEC = r"^(local|fake|titan(:[A-Za-z0-9._:-]{1,120})?)$"


def provider_named(name: str) -> EmbeddingProvider:
    """`local` (MiniLM ONNX, the default), `titan` (Bedrock Titan v2, or `titan:<model>`)
    or `fake` (tests only)."""
    if not re.fullmatch(PROVIDER_SPEC, name):
        raise GrandboError(
            f"unknown embedding provider {name!r}; use 'local', 'titan', 'titan:<model id>' "
            "or 'fake'"
        )
    if name == "local":
        from grandbo.embedding.local import LocalMiniLMProvider

        return LocalMiniLMProvider()
    if name.startswith("titan"):
        from grandbo.embedding.titan import TitanEmbeddingProvider

        _, _, model = name.partition(":")
        return TitanEmbeddingProvider(model_id=model or None)
    from grandbo.embedding.fake import FakeEmbeddingProvider

    return FakeEmbeddingProvider()
