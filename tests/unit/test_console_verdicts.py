"""The incident page lists each verdict with its id, and a removed one as removed (who,
when, why: issue 50, point 4); only an admin is offered the removal, and only of a
verdict that stands."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from grandbo.console.base import CSRF_FIELD, _environment

ENTRY = str(uuid.uuid4())


def _render(template: str, role: str, **page: Any) -> str:
    return (
        _environment()
        .get_template(template)
        .render(
            csrf="c" * 32,
            person="ana@example.com",
            role=role,
            operator_key="ops",
            via="key",
            csrf_field=CSRF_FIELD,
            organization="acme",
            api="http://127.0.0.1",
            done=None,
            **page,
        )
    )


def _verdict(
    verdict_id: int, removal: dict[str, str] | None = None, note: str | None = None
) -> dict[str, Any]:
    return {
        "verdict_id": verdict_id,
        "entry_id": ENTRY,
        "verdict": "misleading",
        "note": note,
        "actor": "incident-closed:ATK-1",
        "recorded_at": "2026-05-01T10:00:00+00:00",
        "removal": removal,
    }


def _page(role: str) -> str:
    removal = {
        "actor": "person:ana@example.com",
        "removed_at": "2026-05-02T09:30:00+00:00",
        "reason": "a forged <b>incident</b> event",
    }
    hit = {"entry_id": ENTRY, "rank": 1, "confidence": 0.4, "model": "m"}
    page = {
        "retrievals": [
            {
                "retrieval_id": str(uuid.uuid4()),
                "at": "2026-05-01T09:00:00+00:00",
                "caller": "k1",
                "incident_id": "ATK-1",
                "topic": "checkout times out",
                "hits": [hit],
                "latency_ms": 3.0,
                "no_precedent": False,
                "unanswered": False,
                "incomplete": False,
            }
        ],
        "next": None,
        "entries": {ENTRY: {"title": "Pool exhausted", "status": "active"}},
        "verdicts": [
            _verdict(41),
            _verdict(42, removal),
            _verdict(43, note="the key was sk-live-123"),
            _verdict(44, note="[redacted]"),
        ],
        "groups": [],
    }
    return _render(
        "incident.html",
        role,
        path="/incidents",
        incident_id="ATK-1",
        page=page,
        verdicts={ENTRY: page["verdicts"]},
        unserved=[],
    )


def _item(html: str, verdict_id: int) -> str:
    found = re.search(rf'<li class="[^"]*" data-verdict-id="{verdict_id}">(.*?)</li>', html, re.S)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("role", ["admin", "curator", "viewer"])
def test_a_removed_verdict_is_shown_removed_and_only_an_admin_may_remove_one(role: str) -> None:
    html = _page(role)
    standing, removed = _item(html, 41), _item(html, 42)
    assert 'class="verdict verdict-misleading removed"' in html
    assert "removed</strong> by <code>person:ana@example.com</code>" in removed
    assert "a forged &lt;b&gt;incident&lt;/b&gt; event" in removed  # a reason is text
    assert "<del>" in removed
    assert "removed</strong>" not in standing
    assert "/incidents/remove-verdict" not in removed
    offered = '<input type="hidden" name="verdict_id" value="41">' in standing
    assert offered == (role == "admin")
    if offered:
        assert '<input type="hidden" name="incident_id" value="ATK-1">' in standing
        assert "required" in standing


@pytest.mark.parametrize("role", ["admin", "curator", "viewer"])
def test_only_an_admin_may_remove_a_note_and_only_one_that_stands(role: str) -> None:
    html = _page(role)
    quoting, removed = _item(html, 43), _item(html, 44)
    assert ("/incidents/remove-note" in quoting) == (role == "admin")
    assert "/incidents/remove-note" not in removed  # read "[redacted]": nothing to remove
    assert "/incidents/remove-note" not in _item(html, 41)  # no note


@pytest.mark.parametrize("role", ["admin", "curator", "viewer"])
def test_a_question_asked_under_no_incident_can_be_removed_from_the_unanswered_page(
    role: str,
) -> None:
    question = {
        "retrieval_id": str(uuid.uuid4()),
        "at": "2026-05-01T09:00:00+00:00",
        "topic": "who pasted the key",
        "incident_id": None,
        "incomplete": False,
    }
    html = _render(
        "unanswered.html",
        role,
        path="/unanswered",
        total=1,
        groups=[{"words": ["key"], "incidents": [], "questions": [question]}],
        next_query=None,
    )
    offered = f'<input type="hidden" name="retrieval_id" value="{question["retrieval_id"]}">'
    assert (offered in html) == (role == "admin")
    if role == "admin":
        assert '<input type="hidden" name="back" value="unanswered">' in html
