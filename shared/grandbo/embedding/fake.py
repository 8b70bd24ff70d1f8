"""A deterministic provider for tests: hashed bag-of-words vectors, or vectors a test pins."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

from grandbo.embedding.base import EMBEDDING_DIMENSIONS, EmbeddingProvider
from grandbo.text.tags import tokenize


class FakeEmbeddingProvider(EmbeddingProvider):
    """Texts sharing words get close vectors; `pinned` maps exact texts to chosen vectors.

    For unit and integration tests only: it carries no meaning beyond shared words.
    """

    vector_cutoff = 0.8
    plausible_cutoffs = (0.3, 1.0)

    def __init__(
        self,
        pinned: Mapping[str, Sequence[float]] | None = None,
        model_id: str = "fake-hash-bow",
        duplicate_distance: float | None = None,
    ) -> None:
        self.model_id = model_id
        # None: nothing is merged or collapsed unless a test asks for it (texts with the
        # same informative words, in any order, embed identically here)
        self.duplicate_distance = duplicate_distance
        self.pinned = dict(pinned or {})
        self.calls: list[list[str]] = []

    def _embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(texts)
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        if text in self.pinned:
            return list(self.pinned[text])
        vector = [0.0] * EMBEDDING_DIMENSIONS
        for tag in tokenize(text) or [text]:
            digest = hashlib.sha256(tag.encode()).digest()
            index = int.from_bytes(digest[:4], "big") % EMBEDDING_DIMENSIONS
            vector[index] += 1.0 if digest[4] % 2 else -1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]
