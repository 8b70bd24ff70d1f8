"""Word diffs between an entry's revisions, for its history (what a correction changed)."""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

Change = tuple[Literal["same", "removed", "added"], str]
_WORDS = re.compile(r"\S+\s*")


def word_diff(before: str, after: str) -> list[Change]:
    """`after` against `before`, word by word: runs of words kept, removed and added."""
    old, new = _WORDS.findall(before), _WORDS.findall(after)
    changes: list[Change] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            changes.append(("same", "".join(old[a0:a1])))
            continue
        if a1 > a0:
            changes.append(("removed", "".join(old[a0:a1])))
        if b1 > b0:
            changes.append(("added", "".join(new[b0:b1])))
    return changes


def revision_diffs(events: list[dict[str, Any]]) -> dict[int, dict[str, list[Change]]]:
    """For each event (by event id) that wrote a text, the word diff of its title and
    summary against the text before it (the first text has none)."""
    diffs: dict[int, dict[str, list[Change]]] = {}
    last: dict[str, str] | None = None
    for event in sorted(events, key=lambda e: e["event_id"]):
        payload = event.get("payload") or {}
        if not isinstance(payload.get("title"), str) or not isinstance(payload.get("summary"), str):
            continue
        text = {"title": payload["title"], "summary": payload["summary"]}
        if last is not None and text != last:
            diffs[event["event_id"]] = {
                field: word_diff(last[field], text[field]) for field in ("title", "summary")
            }
        last = text
    return diffs
