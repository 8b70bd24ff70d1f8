"""The console as a newcomer meets it (issue 53, point 7), in Chromium at 400, 800 and
1366 px: the hits before the search's options and legend; no word broken inside a table
cell (identifiers and addresses wrap at their separators, times are short with the whole
value on hover); a refused form back as it was typed, the reason in words above it; the
entry page's vector status as the write left it."""

from __future__ import annotations

from urllib.parse import urlencode

from .conftest import Tab

TOPIC = "checkout requests time out waiting for a database connection from the pool"
POOL = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
    "service": "checkout-payments-reconciliation-gateway-service",
}
WIDTHS = (400, 800, 1366)

# every word (a run of letters and digits) of every table cell, and whether it renders on
# more than one line: a break inside it (a break at a separator, `-` `@` `.`, is allowed)
_BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('main td, main th')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.textContent.matchAll(/[\\p{L}\\p{N}]+/gu)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()]
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""


def test_the_hits_come_before_the_options_and_the_legend(tab: Tab) -> None:
    console = tab.console
    console.create(POOL)
    console.gateway.drain()
    tab.page.set_viewport_size({"width": 400, "height": 900})
    page = tab.open("/?" + urlencode({"topic": TOPIC}))
    first = page.locator("li.hit").first
    first.wait_for()
    box = first.bounding_box()
    assert box is not None
    assert box["y"] < 450, f"the first hit starts {box['y']:.0f} px down at 400 px"
    # the options and the legend are folded once there is an answer, and still there
    assert page.locator("details.options").get_attribute("open") is None
    assert not page.locator("fieldset.mode").is_visible()
    assert not page.locator("p.legend").is_visible()
    page.locator("details.legend-box > summary").click()
    assert page.locator("p.legend").is_visible()
    # before a question, the options are open
    assert tab.open("/").locator("details.options").get_attribute("open") is not None


def test_no_word_is_broken_inside_a_table_cell(tab: Tab) -> None:
    console = tab.console
    console.create(POOL)
    long_incident = "INC-2026-12-06-checkout-payments-reconciliation-outage-4711"
    for person in ("ann.marie.longname-oncall@payments-platform.example.com", "bo@example.com"):
        reply = console.api("POST", "/v1/admin/people", {"email": person, "role": "curator"})
        assert reply.status in (200, 201), reply.body
    for incident in (long_incident, "INC-2"):
        reply = console.gateway.query(console.tenant, {"topic": TOPIC, "incident_id": incident})
        assert reply.status == 200, reply.body
    for width in WIDTHS:
        tab.page.set_viewport_size({"width": width, "height": 900})
        for path in ("/entries", "/incidents", "/people", "/settings", "/health"):
            page = tab.open(path)
            broken = page.evaluate(_BROKEN_WORDS)
            assert broken == [], f"{path} at {width} px breaks inside {broken}"
    # a time is short, its whole value on hover
    stamp = tab.open("/incidents").locator("td time").first
    assert stamp.get_attribute("title") == stamp.get_attribute("datetime")
    assert len(stamp.inner_text()) == len("2026-12-06 09:30")


def test_a_refused_new_entry_comes_back_filled_with_the_reason_in_words(tab: Tab) -> None:
    page = tab.open("/entries/new")
    page.fill("input[name=title]", "Pool exhausted")
    page.fill("textarea[name=summary]", "the the the the the the")  # thin: refused
    page.fill("input[name=service]", "checkout-api")
    page.fill("input[name=tags]", "Redis, service-discovery")
    page.select_option("select[name=kind]", "episodic")
    page.click("form.entry-form button[type=submit]")
    page.wait_for_load_state()
    alert = page.locator("p.error[role=alert]").inner_text()
    assert alert.startswith("Not created:")
    assert "invalid_input" not in alert
    assert "Summary" in alert
    assert page.input_value("input[name=title]") == "Pool exhausted"
    assert page.input_value("textarea[name=summary]") == "the the the the the the"
    assert page.input_value("input[name=service]") == "checkout-api"
    assert page.input_value("input[name=tags]") == "Redis, service-discovery"
    assert page.input_value("select[name=kind]") == "episodic"
    listed = tab.console.api("POST", "/v1/admin/catalog", {}).body["entries"]
    assert listed == []  # nothing partial was stored
    # the refusal's 4xx is what the tab reports; nothing else went wrong
    tab.problems[:] = [p for p in tab.problems if "400" not in p and "422" not in p]


def test_the_entry_pages_vector_status_is_the_writes(tab: Tab) -> None:
    console = tab.console
    entry = console.create(POOL)
    page = tab.open(f"/entries/{entry['entry_id']}")
    status = page.locator(".vector-status").inner_text()
    stored = console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body
    assert stored["embedded_revision"] is None
    assert "being made by the embed worker" in status
    console.gateway.drain()
    stored = console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body
    assert stored["embedded_revision"] == stored["revision"]
    status = tab.open(f"/entries/{entry['entry_id']}").locator(".vector-status").inner_text()
    assert stored["embed_rev"] in status
