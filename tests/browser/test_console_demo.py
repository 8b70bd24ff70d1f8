"""The README's promise, walked in Chromium on the demo organization's memory: find why a
demo entry matched the demo topic and why another did not, correct one, and see the new
revision in its history."""

from __future__ import annotations

from urllib.parse import urlencode

from grandbo.local.demo import DEMO_ENTRIES, DEMO_TOPIC, seed_demo

from .conftest import Tab


def test_a_new_user_explains_and_corrects_the_demo_memory(tab: Tab) -> None:
    console = tab.console
    seed_demo(console.gateway.runtime.service(), console.tenant)
    console.gateway.runtime.service().embed_pending(console.tenant)

    page = tab.open("/")
    page.fill("input[name=topic]", DEMO_TOPIC)
    page.click("form.query button[type=submit]")
    answer = console.api("POST", "/v1/admin/query", {"topic": DEMO_TOPIC}).body
    first = page.locator("li.hit").first
    assert first.locator("h2").inner_text() == answer["hits"][0]["title"]
    assert {e["title"] for e in DEMO_ENTRIES} >= set(page.locator("li.hit h2").all_inner_texts())
    assert "connection" in first.locator(".shared").inner_text()

    # an entry the topic does not match: the CoreDNS lesson, and why not
    catalog = console.api("POST", "/v1/admin/catalog", {"text": "CoreDNS"}).body["entries"]
    coredns = catalog[0]["entry_id"]
    page = tab.open("/why?" + urlencode({"topic": DEMO_TOPIC, "entry_id": coredns}))
    verdict = page.locator("section.explanation").get_attribute("data-verdict")
    assert verdict in {"not_a_candidate", "outranked"}
    reasons = page.locator("ul.reasons li").all_inner_texts()
    assert any(reason.startswith("Lexical:") for reason in reasons)
    assert any(reason.startswith("Vector:") for reason in reasons)

    # correct the lesson that matched, and see the revision in its history
    first_id = answer["hits"][0]["entry_id"]
    page = tab.open(f"/entries/{first_id}")
    page.fill("#correct input[name=title]", answer["hits"][0]["title"] + " (corrected by an admin)")
    page.click("#correct button[type=submit]")
    newest = page.locator("ol.history li.event").first
    assert newest.get_attribute("data-type") == "entry_corrected"
    assert newest.get_attribute("data-revision") == "2"
    assert console.api("GET", f"/v1/admin/entries/{first_id}").body["revision"] == 2
