"""The embedding contract: exactly 1024 finite, non-zero floats per text, or a loud failure.

`embed_rev` names what produced a vector (provider model + dimensions + text template
version); the vector leg only compares vectors of the current `embed_rev`.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

from grandbo.errors import EmbeddingError, interrupted

_log = logging.getLogger(__name__)

EMBEDDING_DIMENSIONS = 1024
TEXT_TEMPLATE_VERSION = 1

Embedding = list[float]


def render_entry_text(title: str, summary: str, service: str | None) -> str:
    """The text an entry is embedded from (template version TEXT_TEMPLATE_VERSION)."""
    head = f"{title}\n" if not service else f"{title}\nservice: {service}\n"
    return head + summary


def check_embedding(vector: Sequence[float], *, source: str) -> Embedding:
    """Return `vector` as a list if it honours the contract, else raise EmbeddingError."""
    if len(vector) != EMBEDDING_DIMENSIONS:
        raise EmbeddingError(
            f"{source} returned {len(vector)} dimensions; the contract is {EMBEDDING_DIMENSIONS}"
        )
    values = list(map(float, vector))  # one C loop (a comprehension is ~4x slower)
    # a NaN or an infinity anywhere makes the sum non-finite (one C loop, not 1,024 calls)
    if not math.isfinite(sum(values)):
        raise EmbeddingError(f"{source} returned a non-finite value (NaN or infinity)")
    if not any(values):
        raise EmbeddingError(f"{source} returned a zero vector (cosine distance undefined)")
    return values


class EmbeddingProvider(ABC):
    """One model behind one interface. Subclasses implement `_embed`; callers use `embed`."""

    #: Cosine distance under which an entry is close enough to a topic to be a candidate,
    #: calibrated per provider with `grandbo eval`.
    vector_cutoff: float
    #: Provider model identity, e.g. `amazon.titan-embed-text-v2:0`.
    model_id: str
    #: Cosine distance under which two entries' texts may say the same thing (with the
    #: tag overlap of `grandbo.memory.domain.recurrence_rule`); None: not measured, nothing merges.
    duplicate_distance: float | None = None
    #: The cutoffs that keep hybrid quality with this model (measured with `grandbo eval
    #: --sweep`): an organization's calibration outside them is refused, whatever its
    #: label-free separation says (`grandbo.memory.vectors.cutoff`).
    plausible_cutoffs: tuple[float, float] = (0.3, 0.95)

    @property
    def embed_rev(self) -> str:
        return f"{self.model_id}|d{EMBEDDING_DIMENSIONS}|t{TEXT_TEMPLATE_VERSION}"

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """Embed a batch; every vector is checked against the contract."""
        if not texts:
            return []
        try:
            raw = self._embed(list(texts))
        except EmbeddingError:
            raise
        except Exception as exc:  # a provider's own failure becomes one domain error
            raise EmbeddingError(f"{self.model_id} failed: {type(exc).__name__}: {exc}") from exc
        if len(raw) != len(texts):
            raise EmbeddingError(f"{self.model_id} returned {len(raw)} vectors for {len(texts)}")
        return [check_embedding(vector, source=self.model_id) for vector in raw]

    def embed_one(self, text: str) -> Embedding:
        return self.embed([text])[0]

    def warm_or_say(self) -> str | None:
        """`warm`, never failing what calls it: a provider that cannot load now (a model
        file missing, no region for Bedrock) answers its first queries from keywords, as
        any failed embedding does, and this says why (None when it warmed)."""
        try:
            self.warm()
        except Exception as exc:  # the caller serves on; the first query reports it too
            if interrupted(exc):  # a Ctrl-C inside an import (numpy's says ImportError)
                raise KeyboardInterrupt from exc
            _log.warning("the embedding provider did not warm: %s", exc)
            return f"{type(exc).__name__}: {exc}"
        return None

    def warm(self) -> None:  # noqa: B027 - optional: most providers load nothing
        """Load what the first embedding would (a local model's weights, a client): a
        server calls it before it serves, so that its first query meets the topic's
        deadline instead of spending it on loading (issue 43). Nothing by default."""

    @abstractmethod
    def _embed(self, texts: list[str]) -> Sequence[Sequence[float]]:
        """Raw vectors for `texts`, in order."""
