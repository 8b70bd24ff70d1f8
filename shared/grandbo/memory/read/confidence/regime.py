"""What a search could see, and which confidence model speaks for each candidate.

An answer is searched in one of three regimes:

- `complete`: both legs ran over every active entry (the topic was embedded, every
  active entry has a vector of the serving model's current revision);
- `keywords_only`: the meaning leg could not run at all (the topic's embedding missed its
  deadline or failed, or no active entry has a current vector yet): every candidate was
  found by its keywords alone;
- `partial`: the meaning leg ran, but some active entries have no current vector yet
  (just written, just imported, the embed worker behind): those were searchable by
  keywords only.

A candidate the meaning leg could not see is scored by the keyword model, fit with the
vector leg off (`grandbo.memory.read.confidence.fitted.KEYWORDS`) on signals that hold nothing
of a vector (`keyword_view`); every other candidate by the provider's model. Scoring a
keyword-only candidate with the complete model would read "no vector" as "the meaning leg
looked and found it far", and withhold an exact keyword match (issue 43: 158 of 172
degraded answers said "nothing close" while the keyword leg held the incident).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from grandbo.memory.read.confidence.model import ConfidenceModel
from grandbo.memory.repository import SearchLegs


class Searched(enum.StrEnum):
    """How much of the organization's memory the search could look at."""

    COMPLETE = "complete"
    KEYWORDS_ONLY = "keywords_only"
    PARTIAL = "partial"


def searched(*, topic_embedded: bool, active_entries: int, without_vector: int) -> Searched:
    """The regime of a search: whether the topic had a vector, and how many of the active
    entries the meaning leg could not compare with it."""
    if not topic_embedded or (active_entries and without_vector >= active_entries):
        return Searched.KEYWORDS_ONLY
    if without_vector:
        return Searched.PARTIAL
    return Searched.COMPLETE


def keyword_view(legs: SearchLegs) -> SearchLegs:
    """The legs as the keyword leg alone saw them: no vector candidate, no distance."""
    return dataclasses.replace(legs, vector=[], distances={})


@dataclass(frozen=True, slots=True)
class Scored:
    """Every candidate's confidence, and those the keyword model scored."""

    confidence: dict[UUID, float]
    by_keywords: frozenset[UUID]


def score(
    order: Sequence[UUID],
    legs: SearchLegs,
    topic_tags: Sequence[str],
    cutoff: float,
    regime: Searched,
    model: ConfidenceModel,
    keywords: ConfidenceModel,
) -> Scored:
    """Each candidate's confidence (`order`: the candidates in the fused order): by
    `keywords` on the keyword view where the meaning leg could not see it, else by
    `model`."""
    if regime is Searched.KEYWORDS_ONLY:
        blind = list(order)
    elif regime is Searched.PARTIAL:
        # with a topic vector, every candidate with a current vector has its distance
        blind = [i for i in order if i not in legs.distances]
    else:
        blind = []
    unseen = frozenset(blind)
    full = model.confidences(order, legs, topic_tags, cutoff) if len(unseen) < len(order) else {}
    keyword = keywords.confidences(order, keyword_view(legs), topic_tags, cutoff) if unseen else {}
    confidence = {i: keyword[i] if i in unseen else full[i] for i in order}
    return Scored(confidence=confidence, by_keywords=unseen)
