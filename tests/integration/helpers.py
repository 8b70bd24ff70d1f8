"""Small builders shared by the integration tests."""

from __future__ import annotations

import math
import uuid
from typing import Any

from grandbo.embedding.base import EMBEDDING_DIMENSIONS
from grandbo.memory.models import WriteContext


def context(key: str | None = None, actor: str = "test") -> WriteContext:
    return WriteContext(actor=actor, idempotency_key=key or f"test:{uuid.uuid4()}")


def entry(title: str, summary: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "summary": summary, **extra}


def direction(*weights: tuple[int, float]) -> list[float]:
    """A unit vector with the given (dimension, weight) components."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for index, weight in weights:
        vector[index] = weight
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def at_distance(distance: float, axis: int = 1) -> list[float]:
    """A unit vector at the given cosine distance from direction((0, 1))."""
    similarity = 1.0 - distance
    return direction((0, similarity), (axis, math.sqrt(max(0.0, 1 - similarity**2))))
