"""What the search already knows about each candidate, as the confidence model's inputs.

Every signal is absolute (comparable across queries and organizations), never divided by
the best candidate of the same query alone: the vector distance against the tenant's
calibrated cutoff, BM25 against the best score the topic itself could reach, the share of
the topic's tags the entry carries, each leg's rank, whether both legs listed it, and the
gap to the next candidate. `grandbo.memory.read.confidence.model` turns them into a
probability.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from grandbo.memory.repository import SearchLegs
from grandbo.memory.repository.lexical import BM25_K1
from grandbo.memory.repository.postings import TITLE_TAG_TF
from grandbo.text.tags import tokenize

# The feature vector's order: the model's coefficients are named by these
FEATURES = (
    "closeness",  # (cutoff - distance) / cutoff; -1 without a current vector
    "lexical_reach",  # BM25 / the best BM25 the topic's tags could reach
    "tag_share",  # the share of the topic's tags the entry carries
    "lexical_rr",  # 1 / its rank in the lexical leg (0: not listed)
    "vector_rr",  # 1 / its rank in the vector leg (0: not listed)
    "both_legs",  # 1 when both legs listed it
    "gap",  # its lead in reach + closeness over the next weaker candidate
    "recurrences",  # log(1 + times the lesson was seen again)
    # how it stands out from the other candidates of its topic (the background a topic
    # memory does not hold draws from): closeness and reach over their medians, its lead
    # over the second best by each, and whether it is the best by each
    "closeness_over_median",
    "reach_over_median",
    "closeness_lead",
    "reach_lead",
    "closest",
    "best_reach",
    # how much of the topic the entry speaks to, beyond BM25's saturation (issue 43): the
    # share of the topic's rare-word weight (idf) among the tags it shares, the share of
    # its title's words the topic carries, and log of its place in the fused order
    "rare_share",
    "title_share",
    "fused_place",
    # the question's own shape (issue 50: a share of the topic falls as a true question
    # grows, so "how much of the topic" means less for a long topic than for a terse one):
    # log of its distinct words, the share of them the lake has never seen, the shared
    # words' rarity as a mass (log 1 + their idf summed, in units of the rarest word the
    # lake could hold, so that a ten-entry lake and a million-entry one weigh alike) and
    # count (log 1 + n), and
    # the shares and closeness weighed by the topic's size
    "topic_size",
    "topic_unseen",
    "shared_mass",
    "shared_count",
    "closeness_by_size",
    "reach_by_size",
    "share_by_size",
)
# What the keyword leg alone can tell (the keyword model's inputs): no distance, no rank
# in the vector leg, no agreement between legs
KEYWORD_FEATURES = (
    "lexical_reach",
    "tag_share",
    "lexical_rr",
    "gap",
    "recurrences",
    "reach_over_median",
    "reach_lead",
    "best_reach",
    "rare_share",
    "title_share",
    "fused_place",
    "topic_size",
    "topic_unseen",
    "shared_mass",
    "shared_count",
    "reach_by_size",
    "share_by_size",
)

# A title tag's best BM25 term at an average length, per unit of idf: what an entry
# carrying the topic's tag in its title scores for it
_BEST_TERM = TITLE_TAG_TF * (BM25_K1 + 1.0) / (TITLE_TAG_TF + BM25_K1)


@dataclass(frozen=True, slots=True)
class Signals:
    """One candidate's absolute signals for one topic (`FEATURES`, in order)."""

    closeness: float
    lexical_reach: float
    tag_share: float
    lexical_rr: float
    vector_rr: float
    both_legs: float
    gap: float
    recurrences: float
    closeness_over_median: float
    reach_over_median: float
    closeness_lead: float
    reach_lead: float
    closest: float
    best_reach: float
    rare_share: float
    title_share: float
    fused_place: float
    topic_size: float
    topic_unseen: float
    shared_mass: float
    shared_count: float
    closeness_by_size: float
    reach_by_size: float
    share_by_size: float

    def vector(self) -> list[float]:
        return [getattr(self, name) for name in FEATURES]


def idf(doc_count: int, entries: int) -> float:
    """BM25's idf (as `Corpus.read` computes it) of a tag `doc_count` entries carry."""
    return math.log(1.0 + (entries - doc_count + 0.5) / (doc_count + 0.5))


def best_reach(topic_tags: Sequence[str], legs: SearchLegs) -> float:
    """The best BM25 the topic could reach on this tenant: every one of its tags in the
    title of an entry of average length. A tag no entry carries counts as rare as a tag
    can be, so a topic memory has never seen words of reaches little of its best."""
    if not topic_tags:
        return 0.0
    unseen = idf(0, max(legs.active_entries, 1))
    return _BEST_TERM * sum(legs.tag_weights.get(tag, unseen) for tag in set(topic_tags))


def signals_of(
    order: Sequence[UUID],
    legs: SearchLegs,
    topic_tags: Sequence[str],
    cutoff: float,
) -> dict[UUID, Signals]:
    """Each candidate's signals (`order`: the candidates, in the fused order)."""
    reach = best_reach(topic_tags, legs)
    topic = set(topic_tags)
    n_tags = len(topic)
    unseen = idf(0, max(legs.active_entries, 1))
    topic_weight = sum(legs.tag_weights.get(tag, unseen) for tag in topic) or 1.0
    lexical_rank = {c.entry_id: rank for rank, c in enumerate(legs.lexical, start=1)}
    vector_rank = {c.entry_id: rank for rank, c in enumerate(legs.vector, start=1)}
    cutoff = cutoff if cutoff > 0 else 1.0
    size = math.log1p(n_tags)
    unseen_share = (
        sum(1 for tag in topic if tag not in legs.tag_weights) / n_tags if n_tags else 0.0
    )

    def closeness(entry_id: UUID) -> float:
        distance = legs.distances.get(entry_id)
        return -1.0 if distance is None else (cutoff - distance) / cutoff

    def lexical_reach(entry_id: UUID) -> float:
        return legs.lexical_scores.get(entry_id, 0.0) / reach if reach else 0.0

    near = {i: closeness(i) for i in order}
    reached = {i: lexical_reach(i) for i in order}
    strength = {i: reached[i] + max(near[i], 0.0) for i in order}
    ranked = sorted(strength.values(), reverse=True)
    median_near = _median([c for c in near.values() if c > -1.0])
    median_reach = _median([r for r in reached.values() if r > 0.0])
    by_near = sorted(near.values(), reverse=True)
    by_reach = sorted(reached.values(), reverse=True)
    second_near = by_near[1] if len(by_near) > 1 else 0.0
    second_reach = by_reach[1] if len(by_reach) > 1 else 0.0
    signals = {}
    for place, entry_id in enumerate(order):
        entry = legs.entries.get(entry_id)
        title = set(tokenize(entry.title)) if entry is not None else set()
        lex = lexical_rank.get(entry_id)
        vec = vector_rank.get(entry_id)
        mine = strength[entry_id]
        below = next((s for s in ranked if s < mine), 0.0)
        shared = legs.shared_tags.get(entry_id, ())
        mass = sum(legs.tag_weights.get(tag, unseen) for tag in shared)
        signals[entry_id] = Signals(
            closeness=near[entry_id],
            lexical_reach=reached[entry_id],
            tag_share=len(legs.shared_tags.get(entry_id, ())) / n_tags if n_tags else 0.0,
            lexical_rr=0.0 if lex is None else 1.0 / lex,
            vector_rr=0.0 if vec is None else 1.0 / vec,
            both_legs=1.0 if lex is not None and vec is not None else 0.0,
            gap=mine - below,
            recurrences=math.log1p(max(legs.entries[entry_id].seen_count - 1, 0))
            if entry_id in legs.entries
            else 0.0,
            closeness_over_median=near[entry_id] - median_near,
            reach_over_median=reached[entry_id] - median_reach,
            closeness_lead=near[entry_id] - second_near,
            reach_lead=reached[entry_id] - second_reach,
            closest=1.0 if near[entry_id] >= by_near[0] else 0.0,
            best_reach=1.0 if reached[entry_id] >= by_reach[0] else 0.0,
            rare_share=mass / topic_weight,
            title_share=len(title & topic) / len(title) if title else 0.0,
            fused_place=math.log(place + 1),
            topic_size=size,
            topic_unseen=unseen_share,
            shared_mass=math.log1p(mass / unseen),
            shared_count=math.log1p(len(shared)),
            closeness_by_size=near[entry_id] * size,
            reach_by_size=reached[entry_id] * size,
            share_by_size=mass / topic_weight * size,
        )
    return signals


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0
