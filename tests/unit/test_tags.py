"""The tag tokenizer shared by entries and topics."""

from __future__ import annotations

from grandbo.text.tags import MAX_TAG_CHARS, tags_for, tokenize


def test_identifiers_stay_whole_and_their_parts_become_tags() -> None:
    tags = tokenize("checkout-api slow after deploy of db.pool.max")
    assert "checkout-api" in tags
    assert {"checkout", "api"} <= set(tags)
    assert "db.pool.max" in tags
    assert {"db", "pool", "max"} <= set(tags)


def test_case_is_folded_and_words_are_stemmed() -> None:
    assert tokenize("TIMEOUTS Timeout timed-out")[:2] == ["timeout", "timed-out"]
    assert tokenize("Connections exhausted") == ["connect", "exhaust"]


def test_stopwords_single_characters_and_short_numbers_are_dropped() -> None:
    assert tokenize("the a of and it x 7 42") == []
    assert tokenize("HTTP 503 on port 8080") == ["http", "503", "port", "8080"]


def test_unicode_is_normalized_and_kept() -> None:
    # full-width letters fold to ASCII (NFKC); accented words survive, unstemmed
    assert tokenize("\uff23\uff28\uff25\uff23\uff2b\uff2f\uff35\uff34 résumé Ünïcode") == [
        "checkout",
        "résumé",
        "ünïcode",
    ]


def test_punctuation_separates_tokens() -> None:
    assert tokenize("(redis-sessions), [oom]; kafka!!! 'lag'") == [
        "redis-sessions",
        "redi",  # Porter stem, the same on both sides: a topic's "redis" is "redi" too
        "session",
        "oom",
        "kafka",
        "lag",
    ]


def test_very_long_identifiers_are_dropped_but_their_parts_kept() -> None:
    long_part = "a" * (MAX_TAG_CHARS + 1)
    tags = tokenize(f"{long_part}-service-name")
    assert all(len(tag) <= MAX_TAG_CHARS for tag in tags)
    assert "servic" in tags or "service" in tags
    assert long_part not in tags


def test_empty_and_whitespace_text_have_no_tags() -> None:
    assert tokenize("") == []
    assert tokenize(" \n\t ") == []


def test_tags_are_unique_in_first_seen_order() -> None:
    assert tokenize("pool pool POOL pools") == ["pool"]


def test_tags_for_merges_explicit_tags_first() -> None:
    assert tags_for(["Database failover"], explicit=["Aurora-PostgreSQL"])[:3] == [
        "aurora-postgresql",
        "aurora",
        "postgresql",
    ]
