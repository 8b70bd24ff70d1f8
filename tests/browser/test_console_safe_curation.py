"""Curation that is safe to use, in Chromium (issue 36, point 4): a merge previewed and
confirmed, entries chosen by typing their words, redaction typed out with its reason, a
correction that loses a race keeps its text, and a word diff between revisions. Each is
checked against the admin API's own state."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

from grandbo.api.auth import SigningKey, mint_query_token, new_secret

from .conftest import Tab

PAYMENTS = {
    "title": "Payments webhook retries doubled the charge",
    "summary": "The payment provider's webhook was retried after a timeout and the handler "
    "charged the card twice: an idempotency key on the charge fixed it.",
    "service": "payments",
}
REFUNDS = {
    "title": "Refund batch stalled on an expired provider certificate",
    "summary": "The nightly refund batch to the payment provider stalled when its client "
    "certificate expired; renewing it and alerting 30 days ahead fixed it.",
    "service": "payments",
}


def test_a_merge_is_previewed_then_confirmed_with_an_entry_chosen_by_its_words(
    tab: Tab, tmp_path: Path
) -> None:
    console = tab.console
    webhook = console.create(PAYMENTS)
    refunds = console.create(REFUNDS)
    page = tab.open(f"/entries/{webhook['entry_id']}")
    picker = page.locator("#merge input[name=into]")
    picker.press_sequentially("refund batch", delay=20)
    options = page.locator("datalist#into-choices option")
    options.first.wait_for(state="attached")
    assert options.first.get_attribute("value") == refunds["entry_id"]
    assert REFUNDS["title"] in (options.first.get_attribute("label") or "")
    picker.fill(refunds["entry_id"])  # what choosing the suggestion puts in the field
    tab.shot("merge-picker", tmp_path)
    page.click("#merge button[type=submit]")

    # the preview: both texts, what the agent sees afterwards; nothing merged yet
    assert page.locator("h1").inner_text() == "Merge these two entries?"
    assert page.locator("section.merged p.title").inner_text() == PAYMENTS["title"]
    assert page.locator("section.kept p.title").inner_text() == REFUNDS["title"]
    afterwards = page.locator("section.afterwards").inner_text()
    assert REFUNDS["summary"] in afterwards
    assert "no longer shown" in afterwards
    tab.shot("merge-preview", tmp_path)
    assert console.api("GET", f"/v1/admin/entries/{webhook['entry_id']}").body["status"] == "active"
    # cancelled: still nothing merged
    page.get_by_role("link", name="Cancel").click()
    assert console.api("GET", f"/v1/admin/entries/{webhook['entry_id']}").body["status"] == "active"
    page.locator("#merge input[name=into]").fill(refunds["entry_id"])
    page.click("#merge button[type=submit]")
    page.click("#confirm-merge button[type=submit]")
    assert "Merged" in page.locator("p.done").inner_text()
    stored = console.api("GET", f"/v1/admin/entries/{webhook['entry_id']}").body
    assert (stored["status"], stored["merged_into"]) == ("merged", refunds["entry_id"])


def test_redaction_needs_its_reason_and_the_typed_word(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    entry = console.create(PAYMENTS)
    page = tab.open(f"/entries/{entry['entry_id']}")
    form = page.locator("#redact")
    assert "cannot be undone" in form.inner_text()
    form.locator("input[name=reason]").fill("it names a customer")
    form.locator("input[name=confirm]").fill("redact")  # not the word: the browser refuses
    form.locator("button[type=submit]").click()
    assert page.url.endswith(f"/entries/{entry['entry_id']}")
    assert console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").status == 200
    # sent anyway, the console itself refuses it
    csrf = page.locator("#redact input[name=csrf]").input_value()
    refused = page.request.post(
        f"{console.url}/entries/{entry['entry_id']}/redact",
        form={"csrf": csrf, "reason": "it names a customer", "confirm": "yes"},
        headers={"Origin": console.url},
    )
    assert refused.status == 400
    assert "type REDACT to confirm" in refused.text()
    missing = page.request.post(
        f"{console.url}/entries/{entry['entry_id']}/redact",
        form={"csrf": csrf, "reason": "", "confirm": "REDACT"},
        headers={"Origin": console.url},
    )
    assert missing.status == 400
    assert console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").status == 200
    tab.problems.clear()  # the two refusals above are reported as 400s

    tab.shot("redact-form", tmp_path)
    form.locator("input[name=confirm]").fill("REDACT")
    form.locator("button[type=submit]").click()
    assert "Redacted" in page.locator("p.done").inner_text()
    assert console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").status == 410
    assert PAYMENTS["summary"] not in page.locator("body").inner_text()


def test_a_correction_that_loses_a_race_keeps_the_typed_text(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    entry = console.create(PAYMENTS)
    page = tab.open(f"/entries/{entry['entry_id']}")
    mine = "The webhook retry charged twice until the charge carried an idempotency key."
    page.fill("#correct textarea[name=summary]", mine)
    # someone else records a revision first
    theirs = {"summary": "A retried webhook charged the card twice; idempotency keys fixed it."}
    reply = console.api("POST", f"/v1/admin/entries/{entry['entry_id']}/corrections", theirs)
    assert reply.status == 201, reply.body
    page.click("#correct button[type=submit]")
    conflict = page.locator(".conflict")
    assert "Someone else changed this entry" in conflict.inner_text()
    assert (
        theirs["summary"] in conflict.locator("section[aria-label='the current text']").inner_text()
    )
    assert page.locator("#correct textarea[name=summary]").input_value() == mine
    assert page.locator("#correct input[name=expected_revision]").input_value() == "2"
    tab.shot("correction-conflict", tmp_path)
    tab.problems.clear()  # the 409 page
    # sent again, over the current revision: recorded
    page.click("#correct button[type=submit]")
    assert "new revision was recorded" in page.locator("p.done").inner_text()
    stored = console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body
    assert (stored["revision"], stored["summary"]) == (3, mine)

    # the history shows what each revision changed, word by word
    latest = page.locator("ol.history li.event").first
    removed = latest.locator(".diff-summary del").all_inner_texts()
    added = latest.locator(".diff-summary ins").all_inner_texts()
    assert any("card" in words for words in removed)
    assert any("until" in words for words in added)
    assert latest.locator(".diff-title").inner_text() == f"Title: {PAYMENTS['title']}"
    tab.shot("history-diff", tmp_path)


def test_the_review_page_counts_pages_groups_and_acts_in_bulk(tab: Tab, tmp_path: Path) -> None:
    console = tab.console

    def sync(*nodes: dict[str, str]) -> None:
        reply = console.api("POST", "/v1/admin/topology", {"nodes": list(nodes), "sync": True})
        assert reply.status == 200, reply.body

    sync(
        {"node_type": "Service", "external_id": "orders"},
        {"node_type": "Service", "external_id": "billing"},
    )
    lessons = []
    for n in range(27):
        service = "orders" if n % 2 else "billing"
        lessons.append(
            console.create(
                {
                    "title": f"Lesson {n:02d} about the {service} queue backlog",
                    "summary": f"Case {n}: the {service} queue backed up when its consumers "
                    "stalled on a slow downstream call; a timeout fixed it.",
                    "service": service,
                }
            )
        )
    # orders is renamed: its 13 lessons are stale now
    sync(
        {"node_type": "Service", "external_id": "billing"},
        {"node_type": "Service", "external_id": "order-service", "replaces": "orders"},
    )
    page = tab.open("/review")
    stale = page.locator("#stale")
    assert "(13)" in stale.locator("h2").inner_text()
    assert stale.locator("h3.service").all_inner_texts() == ["orders"]
    assert stale.locator("li.stale-lesson").count() == 13
    assert "renamed" in stale.locator("li.stale-lesson .note").first.inner_text()
    tab.shot("review-stale", tmp_path)

    # choose three of them and retire them at once, with a reason
    boxes = stale.locator("input[name=chosen]")
    chosen = [boxes.nth(i).get_attribute("value") for i in range(3)]
    for i in range(3):
        boxes.nth(i).check()
    stale.locator("input[name=reason]").fill("orders was renamed to order-service")
    stale.locator("button[type=submit]").click()
    assert "3 of 3 done." in page.locator("section.outcome").inner_text()
    for entry_id in chosen:
        assert console.api("GET", f"/v1/admin/entries/{entry_id}").body["status"] == "retired"
    assert "(10)" in page.locator("#stale h2").inner_text()
    # the health page's "review" link for stale lessons leads to this section
    assert page.locator("#stale").count() == 1

    # a bulk action with one malformed choice among good ones does none of them
    left = [boxes.nth(i).get_attribute("value") or "" for i in range(2)]
    csrf = page.locator("header form[action='/logout'] input[name=csrf]").input_value()
    for action, chosen_values in (
        ("retire", [left[0], "not-an-entry", left[1]]),
        ("distinct", [f"{left[0]}:{left[1]}", f"{left[1]}:oops"]),
    ):
        body = urlencode(
            [("csrf", csrf), ("action", action), ("reason", "a forged bulk")]
            + [("chosen", value) for value in chosen_values]
        )
        refused = page.request.post(
            f"{console.url}/review/bulk",
            data=body,
            headers={"Origin": console.url, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert refused.status == 400, action
        assert "chosen" in refused.text()
    for entry_id in left:
        entry = console.api("GET", f"/v1/admin/entries/{entry_id}").body
        assert entry["status"] == "active"
    # the pair was not recorded: recording it now is new
    marked = console.api("POST", f"/v1/admin/entries/{left[0]}/distinct", {"other": left[1]}).body
    assert marked["recorded"] is True, marked


def test_review_lists_page_through_more_than_one_page(tab: Tab, keyring_file: Path) -> None:
    """30 entries called misleading by two callers each: a total, pages of 25."""
    console = tab.console
    second = SigningKey(
        key_id=f"{console.tenant}-query-b",
        tenant_id=console.tenant,
        secret=new_secret(),
        roles=["query"],
    )
    document = json.loads(keyring_file.read_text())
    document["keys"].append(second.model_dump())
    keyring_file.write_text(json.dumps(document))
    callers = [console.gateway.keys[f"{console.tenant}-query"], second]
    for n in range(30):
        entry = console.create(
            {
                "title": f"Misleading lesson {n:02d} on cache eviction",
                "summary": f"Case {n}: the cache evicted hot keys under memory pressure.",
                "service": "cache" if n < 20 else "edge",
            }
        )
        for caller in callers:
            reply = console.gateway.request(
                "POST",
                f"/v1/memory/entries/{entry['entry_id']}/feedback",
                json.dumps({"verdict": "misleading", "incident_id": f"INC-{n}"}).encode(),
                {
                    "Authorization": f"Bearer {mint_query_token(caller)}",
                    "Content-Type": "application/json",
                },
            )
            assert reply.status in (200, 201), reply.body
    page = tab.open("/review")
    section = page.locator("#misleading")
    assert "(30)" in section.locator("h2").inner_text()
    assert "1 to 25 of 30" in section.locator("p.pager").inner_text()
    assert section.locator("li").count() == 25
    section.get_by_role("link", name="next").click()
    section = page.locator("#misleading")
    section.locator("p.pager").wait_for()
    assert "26 to 30 of 30" in section.locator("p.pager").inner_text()
    assert section.locator("li").count() == 5
    # grouped by service: each service once on a page, every entry under its own
    services = section.locator("h3.service").all_inner_texts()
    assert len(services) == len(set(services))
    assert set(services) <= {"cache", "edge"}
