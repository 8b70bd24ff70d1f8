"""The topic contract: `query_org_memory` takes a sentence, never a slug or an incident title.

A vector search is only as good as its text. Two incidents describing one problem rarely
share a slug, and a two-or-three-word identifier carries little embeddable signal, so:

1. The topic is 1..MAX_TOPIC_CHARS characters after trimming, with no control characters
   or lone surrogates.
2. It has at least MIN_TOPIC_WORDS words (a word is a whitespace-separated run containing
   a letter or digit). `checkout-api-slow-queries` is one word; `checkout api latency` is
   three: both are rejected.
3. A short topic (at most TITLE_CASE_MAX_WORDS words) in which every word that starts with
   a letter is capitalized is an incident title (`Checkout API Slow Queries After Deploy`)
   and is rejected. A sentence that happens to start with a capital passes.
"""

from __future__ import annotations

import re

from grandbo.errors import InvalidInputError, InvalidTopicError
from grandbo.text.rules import reject_unsafe_text

MAX_TOPIC_CHARS = 4_000
MIN_TOPIC_WORDS = 4
TITLE_CASE_MAX_WORDS = 8

_WORD = re.compile(r"[\w]", re.UNICODE)

GUIDANCE = (
    "send a sentence describing what has been found so far: the symptom, the suspected "
    "mechanism and the affected component, e.g. 'p99 latency on checkout-api tripled after "
    "the 14:05 deploy; suspect the database connection pool is exhausted'"
)


def validate_topic(topic: object) -> str:
    """Return the trimmed topic if it honours the contract, else raise a 4xx-mapped error."""
    if not isinstance(topic, str):
        raise InvalidInputError("topic", "must be a string")
    try:
        reject_unsafe_text(topic)
    except ValueError as exc:
        raise InvalidInputError("topic", str(exc)) from exc
    text = topic.strip()
    if not text:
        raise InvalidTopicError(f"is empty; {GUIDANCE}")
    if len(text) > MAX_TOPIC_CHARS:
        raise InvalidInputError(
            "topic", f"is {len(text)} characters; the limit is {MAX_TOPIC_CHARS}"
        )
    words = [w for w in text.split() if _WORD.search(w)]
    if len(words) < MIN_TOPIC_WORDS:
        shape = "a slug or identifier" if len(words) <= 1 else f"only {len(words)} words"
        raise InvalidTopicError(
            f"{text[:80]!r} is {shape}, which looks like an incident slug or title; {GUIDANCE}"
        )
    if len(words) <= TITLE_CASE_MAX_WORDS and _is_title_case(words):
        raise InvalidTopicError(f"{text[:80]!r} looks like an incident title; {GUIDANCE}")
    return text


def _is_title_case(words: list[str]) -> bool:
    lettered = [w for w in words if w[0].isalpha()]
    return bool(lettered) and all(w[0].isupper() for w in lettered)
