"""How vectors are stored and bound: `halfvec(1024)` (migration 0015), two bytes a
dimension. Every vector the repository sends (a topic, a batch to store, an entry's own
vector read back) goes through `stored`, so the column, its index and the parameters
agree on one type and the planner can use the HNSW index's operator as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgvector import HalfVector

# The per-tenant HNSW index's operator class (grandbo.memory.vector_index)
COSINE_OPS = "halfvec_cosine_ops"


def stored(values: Sequence[float] | HalfVector) -> HalfVector:
    """`values` as the column stores them (a vector read back is passed through)."""
    if isinstance(values, HalfVector):
        return values
    return HalfVector(values if isinstance(values, list) else list(values))
