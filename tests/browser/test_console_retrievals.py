"""The retrieval log in Chromium (issue 36, point 3): per incident, what the agent asked
and what memory answered, with the verdicts and their notes inline; the questions memory
could not answer, grouped by similar topics, from which a curator writes the lesson."""

from __future__ import annotations

import json
from pathlib import Path

from grandbo.api.auth import mint_query_token

from .conftest import ConsoleServer, Tab

LESSON = {
    "title": "Checkout pool exhausted by a retry storm",
    "summary": "Checkout requests time out because the database connection pool is exhausted "
    "by retries; capping retries with jittered back-off fixed it.",
    "service": "checkout",
}
ANSWERED = "checkout requests time out because the database connection pool is exhausted"
UNKNOWN = [
    "the kafka consumer group rebalanced endlessly after a broker upgrade",
    "kafka consumer group rebalancing loop during the broker rolling upgrade",
    "certificate expired on the internal payments gateway",
]


def _ask(console: ConsoleServer, topic: str, incident: str) -> dict:  # type: ignore[type-arg]
    token = mint_query_token(console.gateway.keys[f"{console.tenant}-query"])
    reply = console.gateway.request(
        "POST",
        "/v1/memory/query",
        json.dumps({"topic": topic, "incident_id": incident}).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert reply.status == 200, reply.body
    return dict(reply.body)


def _verdict(console: ConsoleServer, entry_id: str, body: dict) -> None:  # type: ignore[type-arg]
    token = mint_query_token(console.gateway.keys[f"{console.tenant}-query"])
    reply = console.gateway.request(
        "POST",
        f"/v1/memory/entries/{entry_id}/feedback",
        json.dumps(body).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert reply.status in (200, 201), reply.body


def test_an_incident_shows_what_was_asked_answered_and_judged(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    entry = console.create(LESSON)
    console.gateway.drain()
    answer = _ask(console, ANSWERED, "INC-77")
    assert [hit["entry_id"] for hit in answer["hits"]] == [entry["entry_id"]]
    _ask(console, UNKNOWN[0], "INC-77")
    _verdict(
        console,
        entry["entry_id"],
        {
            "verdict": "misleading",
            "incident_id": "INC-77",
            "note": "it was DNS <b>not</b> the pool",
        },
    )

    page = tab.open("/incidents")
    row = page.locator("table.incidents tbody tr").first
    assert row.locator("td").nth(0).inner_text() == "INC-77"
    assert row.locator("td").nth(1).inner_text() == "2"
    assert row.locator("td").nth(2).inner_text() == "1"
    row.locator("a").click()
    assert page.url.endswith("/incidents?id=INC-77")
    asked = page.locator("ol.retrievals > li")
    asked.first.wait_for()
    assert asked.count() == 2
    assert asked.nth(0).locator("blockquote.topic").inner_text() == UNKNOWN[0]
    assert "not answered" in asked.nth(0).inner_text()
    assert "Memory answered nothing" in asked.nth(0).inner_text()
    answered = asked.nth(1)
    assert answered.locator("blockquote.topic").inner_text() == ANSWERED
    assert answered.locator("ol.answer a").first.inner_text() == LESSON["title"]
    verdict = answered.locator("li.verdict").inner_text()
    assert "misleading" in verdict
    assert "it was DNS <b>not</b> the pool" in verdict  # a note is text, never markup
    tab.shot("incident", tmp_path)


def test_unanswered_questions_grouped_lead_to_the_missing_lesson(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    for n, topic in enumerate(UNKNOWN):
        _ask(console, topic, f"INC-{n}")
    page = tab.open("/unanswered")
    groups = page.locator("section.group")
    assert groups.count() == 2
    first = groups.nth(0)
    assert first.locator("h2").inner_text().startswith("2 question(s) about")
    assert "kafka" in first.locator("h2 .words").inner_text()
    assert first.locator("ul.questions li").count() == 2
    tab.shot("unanswered", tmp_path)
    first.get_by_role("link", name="Write the missing lesson").click()
    assert page.url.startswith(console.url + "/entries/new?")
    assert page.locator("textarea[name=summary]").input_value() in UNKNOWN[:2]
    assert page.locator("input[name=incident_id]").input_value() in ("INC-0", "INC-1")
    page.fill("input[name=title]", "Kafka consumer groups rebalance forever after upgrades")
    page.fill(
        "textarea[name=summary]",
        "A rolling broker upgrade left the consumer group rebalancing in a loop until "
        "session.timeout.ms was raised above the brokers' restart time.",
    )
    page.click("form.entry-form button[type=submit]")
    assert "Entry created" in page.locator("p.done").inner_text()
    catalog = console.api("POST", "/v1/admin/catalog", {"text": "rebalance forever"}).body
    assert len(catalog["entries"]) == 1


SECRET = "hunter2-Zq81xW"


def test_a_redacted_secret_leaves_the_incident_page_and_an_admin_removes_a_question(
    tab: Tab, tmp_path: Path
) -> None:
    """Issue 44, point 1: the page shows the question as its redaction rewrote it; an admin
    removes another (a secret typed into a topic) with a reason, and it is gone."""
    console = tab.console
    entry = console.create(
        {
            "title": "Database password pasted into the incident channel",
            "summary": f"The payments database password {SECRET} was pasted into the "
            "incident channel during the outage; it was rotated within the hour.",
            "incident_id": "INC-SEC",
        }
    )
    console.gateway.drain()
    _ask(console, f"was the password {SECRET} pasted into the channel", "INC-SEC")
    _ask(console, "the ops token is tok-9f8e7d6c5b typed by mistake into this topic", "INC-TOK")
    # filed before the redaction (a question still in flight then keeps nothing of itself)
    assert console.gateway.runtime.retrieval_writer.flush(5)
    redacted = console.api(
        "POST", f"/v1/admin/entries/{entry['entry_id']}/redaction", {"reason": "a password"}
    )
    assert redacted.status == 200, redacted.body

    # the incident's id went with the text: its page names no question, and no page the secret
    page = tab.open("/incidents?id=INC-SEC")
    assert "No question named this incident" in page.content()
    assert SECRET not in page.content()
    assert SECRET not in tab.open("/incidents").content()

    page = tab.open("/incidents?id=INC-TOK")
    typed = page.locator("ol.retrievals > li", has_text="tok-9f8e7d6c5b")
    typed.locator("details.remove-question summary").click()
    typed.locator("input[name=reason]").fill("a token typed into a topic")
    typed.locator("form button[type=submit]").click()
    assert "Removed" in page.locator("p.done").inner_text()
    assert "tok-9f8e7d6c5b" not in page.content()
    assert page.locator("ol.retrievals > li").count() == 0
    tab.shot("incident-question-removed", tmp_path)
