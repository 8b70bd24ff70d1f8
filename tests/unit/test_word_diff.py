"""The history's word diff: what a correction changed, word by word, and a bounded cost
however long or repetitive the texts are (the page is drawn for every curator)."""

from __future__ import annotations

import time
from typing import Any

from grandbo.console.diff import MAX_DIFF_WORK, PAGE_DIFF_WORK, revision_diffs, word_diff
from grandbo.memory.domain.models import MAX_SUMMARY_CHARS


def _event(event_id: int, title: str, summary: str) -> dict[str, Any]:
    return {"event_id": event_id, "payload": {"title": title, "summary": summary}}


def _joined(changes: list[tuple[str, str]], *kinds: str) -> str:
    return "".join(text for kind, text in changes if kind in kinds)


def test_a_correction_shows_the_words_it_removed_and_added() -> None:
    changes, _ = word_diff(
        "Redis ran out of memory after the deploy.",
        "Redis ran out of connections after the deploy.",
    )
    assert ("removed", "memory ") in changes
    assert ("added", "connections ") in changes
    assert _joined(changes, "same", "removed") == "Redis ran out of memory after the deploy."
    assert _joined(changes, "same", "added") == "Redis ran out of connections after the deploy."


def test_a_rewrite_too_long_to_match_is_shown_whole_between_its_kept_ends() -> None:
    # alternating words are difflib's slow case: matched, this pair takes seconds
    before = "Start. " + " ".join("ab"[i % 2] for i in range(3000)) + " End."
    after = "Start. " + " ".join("ab"[(i // 3) % 2] for i in range(3000)) + " End."
    started = time.perf_counter()
    changes, work = word_diff(before, after)
    elapsed = time.perf_counter() - started
    # nothing matched: the middle is shown as rewritten, and costs its words
    assert work == sum(len(text.split()) for kind, text in changes if kind != "same")
    assert changes[0] == ("same", "Start. a ")  # both go on with "a"
    assert changes[-1][0] == "same"
    assert changes[-1][1].endswith("End.")
    assert [kind for kind, _ in changes[1:-1]] == ["removed", "added"]
    assert _joined(changes, "same", "removed") == before
    assert _joined(changes, "same", "added") == after
    assert elapsed < 1.0, elapsed  # generous: the match itself would take several seconds


def test_a_one_word_correction_of_the_longest_summary_is_still_shown_word_by_word() -> None:
    words = [f"w{i}" for i in range(MAX_SUMMARY_CHARS // 8)]
    before = " ".join(words)
    after = " ".join([*words[:1000], "changed", *words[1001:]])
    changes, work = word_diff(before, after)
    assert [kind for kind, _ in changes] == ["same", "removed", "added", "same"]
    assert changes[1] == ("removed", "w1000 ")
    assert changes[2] == ("added", "changed ")
    assert work == 1


def test_a_history_spends_a_bounded_work_in_all_however_many_revisions() -> None:
    # every revision rewrites a repetitive middle just under the per-diff limit
    side = int(MAX_DIFF_WORK**0.5) - 1
    events = [
        _event(
            n,
            "Title",
            " ".join([f"first{n}"] + ["ab"[(i // (n % 3 + 1)) % 2] for i in range(side - 2)])
            + f" last{n}",
        )
        for n in range(1, 60)
    ]
    diffs = revision_diffs(events)
    assert len(diffs) == 58  # the first text has no diff
    matched = [d for d in diffs.values() if any(kind == "same" for kind, _ in d["summary"])]
    rewritten = [
        d for d in diffs.values() if [kind for kind, _ in d["summary"]] == ["removed", "added"]
    ]
    # the budget lets about PAGE_DIFF_WORK / side² of them be matched; the rest are whole
    assert 0 < len(matched) <= PAGE_DIFF_WORK // (side * side) + 1
    assert rewritten, "past the page's budget a revision is shown as rewritten"
    for revision in diffs.values():
        assert revision["title"] == [("same", "Title")]


def test_a_history_with_unchanged_texts_or_no_text_has_no_diffs() -> None:
    events = [
        _event(1, "Title", "The same summary."),
        {"event_id": 2, "payload": {"reason": "retired"}},
        _event(3, "Title", "The same summary."),
    ]
    assert revision_diffs(events) == {}
