"""Fusion of the lexical and vector legs: every candidate scored on both signals.

The candidates are the union of the two legs' top lists. Each is scored on both legs,
whichever leg found it (its BM25 over tag sets, 0 when it shares no tag with the topic;
its cosine similarity to the topic, 0 without a current vector), each signal divided by
its best value among the candidates, and the two mixed:

    score = LEXICAL_WEIGHT * bm25 / best bm25 + (1 - LEXICAL_WEIGHT) * similarity / best similarity

So 1.0 is a candidate best on both signals. This replaced Reciprocal Rank Fusion (k = 60)
of the two rank lists, the seed's fusion, after it was measured to win on both
development corpora (docs/EVAL.md, "Rank deeper"): ranks throw away how far apart two
candidates are, and a candidate found by one leg only had no say from the other.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

# Measured on the development corpora (bench/experiments/rank_depth.py): 0.5 drops GitBugs recall@5,
# 0.7 the mechanism task; 0.6 lifts post-mortem symptoms and GitBugs and holds mechanism.
LEXICAL_WEIGHT = 0.6
FUSION = (
    f"{LEXICAL_WEIGHT} x bm25/best + {1 - LEXICAL_WEIGHT:.1f} x cosine similarity/best over "
    "every candidate of lexical top 25 and vector top 25, each scored on both legs; "
    "sliced after fusion"
)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class FusedRank(Generic[K]):
    key: K
    score: float
    ranks: tuple[int | None, ...]  # its rank in each leg's own list (None: not in it)
    # the score's two terms: the lexical weight times BM25/best, the rest times similarity/best
    parts: tuple[float, float] = (0.0, 0.0)


def score_fusion(
    legs: Sequence[Sequence[K]],
    lexical_scores: Mapping[K, float],
    similarities: Mapping[K, float],
    *,
    lexical_weight: float = LEXICAL_WEIGHT,
) -> list[FusedRank[K]]:
    """Fuse the legs' lists (lexical first, then vector) by both signals of every candidate.

    `lexical_scores` and `similarities` hold each candidate's BM25 and cosine similarity
    (a candidate missing from one counts 0 there; negative similarities count 0). The
    whole fused list is returned, best first; callers slice only after fusion. Ties keep
    the order of first appearance (list by list, rank by rank), so the result is
    deterministic.
    """
    ranks: dict[K, list[int | None]] = {}
    for list_index, ranking in enumerate(legs):
        for rank, key in enumerate(ranking, start=1):
            slots = ranks.setdefault(key, [None] * len(legs))
            if slots[list_index] is None:  # a repeat within one list keeps its best rank
                slots[list_index] = rank
    lexical = {key: max(0.0, lexical_scores.get(key, 0.0)) for key in ranks}
    similar = {key: max(0.0, similarities.get(key, 0.0)) for key in ranks}
    best_lexical = max(lexical.values(), default=0.0)
    best_similar = max(similar.values(), default=0.0)
    parts = {
        key: (
            lexical_weight * (lexical[key] / best_lexical if best_lexical else 0.0),
            (1.0 - lexical_weight) * (similar[key] / best_similar if best_similar else 0.0),
        )
        for key in ranks
    }
    scores = {key: lexical_part + vector_part for key, (lexical_part, vector_part) in parts.items()}
    order = {key: i for i, key in enumerate(ranks)}
    fused = sorted(ranks, key=lambda key: (-round(scores[key], 12), order[key]))
    return [FusedRank(key, scores[key], tuple(ranks[key]), parts[key]) for key in fused]
