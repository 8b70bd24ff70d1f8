"""Reciprocal Rank Fusion of the lexical and vector legs."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

RRF_K = 60

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class FusedRank(Generic[K]):
    key: K
    score: float
    ranks: tuple[int | None, ...]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], k: int = RRF_K) -> list[FusedRank[K]]:
    """Fuse ranked id lists: each list adds 1 / (k + rank) for each id it holds (rank from 1).

    The whole fused list is returned, best first; callers slice only after fusion. Ties on
    score keep the order of first appearance (list by list, rank by rank), so the result is
    deterministic.
    """
    scores: dict[K, float] = {}
    ranks: dict[K, list[int | None]] = {}
    for list_index, ranking in enumerate(rankings):
        for rank, key in enumerate(ranking, start=1):
            slots = ranks.setdefault(key, [None] * len(rankings))
            if slots[list_index] is not None:
                continue  # a duplicate within one list counts once, at its best rank
            slots[list_index] = rank
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    order = {key: i for i, key in enumerate(scores)}
    fused = sorted(scores, key=lambda key: (-scores[key], order[key]))
    return [FusedRank(key, scores[key], tuple(ranks[key])) for key in fused]
