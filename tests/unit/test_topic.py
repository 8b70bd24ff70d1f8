"""The topic contract: sentences pass, slugs and titles are rejected with guidance."""

from __future__ import annotations

import pytest

from grandbo.errors import InvalidInputError, InvalidTopicError
from grandbo.memory.domain.topic import MAX_TOPIC_CHARS, validate_topic


@pytest.mark.parametrize(
    "topic",
    [
        "checkout-api-slow-queries",
        "INC-1042",
        "checkout latency",
        "checkout api latency",
        "Checkout API Slow Queries After Deploy",
        "Database Connection Pool Exhausted",
    ],
)
def test_slugs_short_phrases_and_titles_are_rejected(topic: str) -> None:
    with pytest.raises(InvalidTopicError) as error:
        validate_topic(topic)
    assert error.value.field == "topic"
    assert "sentence" in error.value.message  # it says what to send instead


@pytest.mark.parametrize(
    "topic",
    [
        "checkout-api requests time out waiting for a database connection",
        "p99 latency tripled after the deploy",  # starts with a digit-led word
        "Pods are OOMKilled every few minutes since the cache TTL change",
        "DNS lookups intermittently time out across namespaces",
        "Checkout Is Slow And We Suspect The Connection Pool After The Deploy Today",  # > 8 words
    ],
)
def test_sentences_pass_trimmed(topic: str) -> None:
    assert validate_topic(f"  {topic}  ") == topic


def test_four_words_is_the_minimum() -> None:
    assert validate_topic("kafka consumers lag behind")
    with pytest.raises(InvalidTopicError):
        validate_topic("kafka consumers lag")


def test_empty_topic_is_rejected() -> None:
    with pytest.raises(InvalidTopicError, match="empty"):
        validate_topic("   ")


def test_over_long_topic_is_rejected_with_the_limit() -> None:
    with pytest.raises(InvalidInputError, match=str(MAX_TOPIC_CHARS)):
        validate_topic("slow queries everywhere " * 500)


@pytest.mark.parametrize(
    "topic", ["nul\x00 byte in the topic here", "lone \ud800 surrogate in topic"]
)
def test_unstorable_characters_are_rejected(topic: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        validate_topic(topic)
    assert error.value.field == "topic"


@pytest.mark.parametrize("topic", [None, 42, ["a", "list"]])
def test_non_strings_are_rejected(topic: object) -> None:
    with pytest.raises(InvalidInputError, match="string"):
        validate_topic(topic)
