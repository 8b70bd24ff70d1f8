"""Search as Beacon sees it, explained, and "why not this one?", in Chromium: what the
page says is what the admin API answers."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from .conftest import ConsoleServer, Tab

POOL = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
    "service": "checkout-api",
}
TLS = {
    "title": "Expired intermediate certificate on the edge proxy",
    "summary": "The edge proxy served a chain with an expired intermediate; clients with "
    "strict validation refused every handshake until the bundle was replaced.",
}
TOPIC = "checkout requests time out waiting for a database connection from the pool"


def test_search_shows_each_hit_and_why_it_matched(tab: Tab, tmp_path: Path) -> None:
    console: ConsoleServer = tab.console
    pool = console.create(POOL)
    console.create(TLS)
    console.gateway.drain()

    page = tab.open("/")
    page.fill("input[name=topic]", TOPIC)
    page.click("form.query button[type=submit]")
    hits = page.locator("li.hit")
    answer = console.api("POST", "/v1/admin/query", {"topic": TOPIC}).body
    assert hits.count() == len(answer["hits"])
    first = hits.nth(0)
    assert first.get_attribute("data-entry") == pool["entry_id"]
    assert first.locator("h2").inner_text() == POOL["title"]
    why = answer["hits"][0]["why"]
    # the confidence first, as a percentage; the fused score a detail below it
    assert first.locator("p").first.get_attribute("class") == "confidence"
    shown = first.locator("strong.confidence").inner_text()
    assert shown == f"{answer['hits'][0]['confidence'] * 100:.0f}%"
    assert first.locator("strong.fused").inner_text() == f"{why['fused_score']:.4f}"
    shared = first.locator(".shared").inner_text()
    assert "connection" in shared
    assert "pool" in shared
    # the bar: one rect per leg, widths the fused score's two terms
    lexical = float(first.locator("svg.bar rect.lexical").get_attribute("width") or 0)
    assert lexical == round(why["lexical_part"] * 240, 1)
    metadata = page.locator("section.metadata").inner_text()
    assert f"lexical {answer['metadata']['lexical_candidates']}" in metadata
    assert "cutoff" in metadata
    assert f"floor {answer['metadata']['min_confidence']}" in metadata
    tab.shot("search", tmp_path)


def test_why_not_this_one_names_the_reasons(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    console.create(POOL)
    tls = console.create(TLS)
    console.gateway.drain()

    page = tab.open("/?" + urlencode({"topic": TOPIC}))
    page.fill("input[name=entry_id]", tls["entry_id"])
    page.click("button:has-text('Why not this one?')")
    section = page.locator("section.explanation")
    assert section.get_attribute("data-verdict") == "not_a_candidate"
    expected = console.api(
        "POST", "/v1/admin/explanation", {"topic": TOPIC, "entry_id": tls["entry_id"]}
    ).body
    reasons = [r.strip() for r in page.locator("ul.reasons li").all_inner_texts()]
    assert reasons == expected["reasons"]
    assert any("shares no tag" in reason for reason in reasons)
    assert any("over the cutoff" in reason for reason in reasons)
    assert page.locator("ol.ahead li").count() >= 1
    tab.shot("why-not-this-one", tmp_path)

    # a served entry says where
    page = tab.open(
        "/why?" + urlencode({"topic": TOPIC, "entry_id": expected["ahead"][0]["entry_id"]})
    )
    assert page.locator("section.explanation").get_attribute("data-verdict") == "served"
    assert "served 1st" in page.locator("p.verdict").inner_text()
