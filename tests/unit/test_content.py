"""The minimum informative content of an entry: where the line is, and what the error says."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grandbo.errors import invalid_input_from
from grandbo.memory.domain.content import (
    MIN_INFORMATIVE_TAGS,
    MIN_SUMMARY_WORDS,
    informative_tags,
    missing_content,
    summary_words,
)
from grandbo.memory.domain.models import EntryText, NewEntry


def test_an_entry_exactly_at_the_minimum_is_accepted() -> None:
    title, summary = "Disk full", "WAL volume filled while the replica was down"
    assert summary_words(summary) == MIN_SUMMARY_WORDS
    assert len(informative_tags(title, summary)) == MIN_INFORMATIVE_TAGS
    assert missing_content(title, summary) is None
    assert NewEntry(title=title, summary=summary).summary == summary


@pytest.mark.parametrize(
    ("title", "summary", "missing"),
    [
        # one word short of the minimum
        ("Disk full", "WAL volume filled while the replica lagged", "is too short: 7 words"),
        # enough words, one informative tag short: stopwords do not count
        ("Disk full", "WAL volume filled while it was down again", "give 5 distinct informative"),
        ("Network issue", "network issue again", "is too short: 3 words"),
        ("Database outage", "it was the one that was down and then it was not", "give 2 distinct"),
        ("Timeouts", " ".join(["timeout"] * 12), "give 1 distinct informative tag (timeout)"),
    ],
)
def test_below_the_minimum_the_error_names_summary_and_what_is_missing(
    title: str, summary: str, missing: str
) -> None:
    for model in (NewEntry, EntryText):  # a create and a correction
        with pytest.raises(ValidationError) as error:
            model(title=title, summary=summary)
        problem = invalid_input_from(error.value)
        assert problem.field == "summary"
        assert missing in problem.message
        assert "at least" in problem.message
        assert "the mechanism" in problem.message  # and what to write instead


def test_words_are_runs_with_a_letter_or_digit() -> None:
    assert summary_words("the pool - was  exhausted ; 503s") == 5
    assert summary_words(" \n ") == 0


def test_a_missing_title_is_reported_as_the_title() -> None:
    with pytest.raises(ValidationError) as error:
        NewEntry.model_validate({"summary": "network issue"})
    assert invalid_input_from(error.value).field == "title"


@pytest.mark.parametrize(
    ("title", "summary"),
    [
        ("Checkout database pool exhausted by connection leak on retry", "a b c d e f g h"),
        ("Checkout database pool exhausted by connection leak on retry", ". a . b . c . d"),
        ("Checkout database pool exhausted by connection leak on retry", "_ _ _ _ _ _ _ _ _"),
        # a rich title over a summary that says nothing of its own
        (
            "Checkout database pool exhausted by connection leak",
            "it was the thing that we saw then",
        ),
    ],
)
def test_a_summary_of_nothing_under_a_rich_title_is_thin(title: str, summary: str) -> None:
    assert missing_content(title, summary) is not None


@pytest.mark.parametrize(
    ("title", "summary"),
    [
        (
            "结账服务数据库连接池耗尽",
            "结账服务在重试路径上泄漏数据库连接\uff0c直到连接池耗尽\uff0c请求在等待连接时超时。"
            "重启服务并修复重试逻辑后恢复正常。",
        ),
        (
            "チェックアウトのDB接続プール枯渇",
            "チェックアウトサービスがリトライ経路でデータベース接続をリークし\u3001"
            "プールが枯渇してリクエストがタイムアウトした。",
        ),
        # words joined by zero-width spaces (pasted from a chat tool)
        (
            "Checkout pool exhausted",
            "checkout\u200bservice\u200bleaked\u200bdatabase\u200bconnections\u200bon\u200ba"
            "\u200bretry\u200bpath\u200buntil\u200bexhausted",
        ),
    ],
)
def test_real_entries_without_spaces_between_words_are_not_thin(title: str, summary: str) -> None:
    assert missing_content(title, summary) is None


def test_counts_are_worded_in_the_singular_when_there_is_one() -> None:
    problem = missing_content("Outage", "outage")
    assert problem is not None
    assert problem.startswith("is too short: 1 word,")
