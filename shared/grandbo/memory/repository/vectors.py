"""How vectors are stored and bound: `halfvec(1024)` (migration 0015), two bytes a
dimension. Every vector the repository sends (a topic, a batch to store, an entry's own
vector read back) goes through `stored`, so the column, its index and the parameters
agree on one type and the planner can use the HNSW index's operator as it is.

A vector is scaled to unit length before it is rounded to half precision. Cosine distance
does not see length, so nothing is lost, and what half precision could not hold is gone:
a value past its range (±65,504) or a vector so short that its components would round to
0 or to each other (two distinct short vectors stored as one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pgvector import HalfVector


def stored(values: Sequence[float] | HalfVector) -> HalfVector:
    """`values` at unit length as the column stores them (a stored vector read back is
    passed through). A zero or non-finite vector is refused (`check_embedding` keeps
    those from every provider)."""
    if isinstance(values, HalfVector):
        return values
    # no numpy: the Lambda layer does not carry it (one C loop for the length)
    norm = math.hypot(*values)
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError("a vector to store must be finite and non-zero")
    return HalfVector([x / norm for x in values])
