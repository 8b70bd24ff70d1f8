"""Search as Beacon sees it, explained, and "why not this one?", in Chromium: what the
page says is what the admin API answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any
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
    # the hits first; how it was searched folded under them, words not stems
    assert first.locator("span.likelihood").inner_text() in ("likely", "possible", "weak")
    assert first.locator("p.summary").inner_text() == POOL["summary"]
    order = page.evaluate(
        "() => [...document.querySelectorAll('ol.hits, details.diagnostics')].map(e => e.tagName)"
    )
    assert order == ["OL", "DETAILS"]
    assert not page.locator("section.metadata").is_visible()
    page.locator("details.diagnostics > summary").click()
    metadata = page.locator("section.metadata").inner_text()
    assert "connection" in metadata  # the topic's words, not their stems
    assert "connect " not in metadata
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


def test_the_search_fits_a_narrow_screen_and_a_wide_one(tab: Tab, tmp_path: Path) -> None:
    """Issue 45: the layout works from 400 px up (no page wider than the screen) and at
    1366 px; the hits come first at both."""
    console = tab.console
    console.create(POOL)
    console.create(  # one long unbroken identifier (a Java exception's class name)
        {
            "title": "Checkout pool exhausted: org.apache.commons.dbcp2."
            "PoolExhaustedConnectionTimeoutException",
            "summary": "The checkout service threw org.apache.commons.dbcp2.PoolExhaustedConnection"
            "TimeoutExceptionWhileWaitingForAFreeDatabaseConnection until the pool grew.",
            "service": "checkout-api",
        }
    )
    console.gateway.drain()
    for width in (400, 1366):
        tab.page.set_viewport_size({"width": width, "height": 900})
        page = tab.open("/?" + urlencode({"topic": TOPIC}))
        page.locator("li.hit").first.wait_for()
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"the page is {overflow} px wider than a {width} px screen"
        box = page.locator("input[type=text][name=topic]").bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= width
        tab.shot(f"search-{width}px", tmp_path)
        topology = tab.open("/topology")
        overflow = topology.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"the topology page is {overflow} px wider than {width} px"


PAGES = (
    "/",
    "/?topic=checkout+requests+time+out+waiting+for+a+database+connection+from+the+pool",
    "/?mode=keywords&topic=checkout+pool",
    "/why",
    "/entries",
    "/entries/new",
    "/entries/{entry_id}",
    "/review",
    "/incidents",
    "/unanswered",
    "/health",
    "/settings",
    "/topology",
    "/growth",
    "/people",
)


def test_every_page_fits_a_narrow_screen_and_a_wide_one(tab: Tab, tmp_path: Path) -> None:
    """Issue 45: every page of the console at 400 px and at 1366 px: none wider than the
    screen, every form field inside it, Pico's styles and the console's own loaded (from
    the console itself: the tab fails on any 4xx or CSP report), a screenshot of each."""
    console = tab.console
    entry_id = console.create(POOL)["entry_id"]
    console.gateway.drain()
    for width in (400, 800, 1366):
        tab.page.set_viewport_size({"width": width, "height": 900})
        for path in PAGES:
            page = tab.open(path.format(entry_id=entry_id))
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{path} is {overflow} px wider than a {width} px screen"
            outside = page.evaluate(
                """(width) => [...document.querySelectorAll(
                'main input, main select, main textarea, main button')].filter(e =>
                e.type !== 'hidden' &&
                e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > width
                ).map(e => e.name || e.textContent)""",
                width,
            )
            assert outside == [], f"{path} at {width} px: {outside} past the screen's edge"
            # the content keeps a margin from the window's edge (a half-screen window)
            left = page.evaluate(
                "() => document.querySelector('main h1').getBoundingClientRect().left"
            )
            assert left >= 8, f"{path} at {width} px: the heading touches the edge ({left} px)"
            # Pico's typeface and the console's own rules are in force
            family = page.evaluate("() => getComputedStyle(document.body).fontFamily")
            assert "system-ui" in family, family
            name = path.strip("/").split("?")[0].replace("/", "-").replace("{entry_id}", "one")
            query = "-search" if "topic=" in path else ""
            # into the test's own folder (docs/console keeps the search's pair only)
            shot = tmp_path / f"page-{name or 'search'}{query}-{width}px.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 1000


_CONTRAST = """(selector) => [...document.querySelectorAll(selector)].map(e => {
  const rgb = s => s.match(/[0-9.]+/g).slice(0, 3).map(Number).map(v => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  const lum = c => 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  let node = e, bg = 'rgba(0, 0, 0, 0)';
  while (node && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
    bg = getComputedStyle(node).backgroundColor; node = node.parentElement; }
  const [a, b] = [lum(rgb(getComputedStyle(e).color)), lum(rgb(bg))];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
})"""


def test_the_console_reads_in_dark_mode_and_signs_in_styled(
    browser: Any, console: ConsoleServer, tmp_path: Path
) -> None:
    """Issue 45's review: with the system's dark scheme, the confidence words keep a
    readable contrast (WCAG's 4.5:1 for text); the sign-in page carries Pico and the
    viewport like every other page."""
    console.create(POOL)
    console.gateway.drain()
    context = browser.new_context(color_scheme="dark", viewport={"width": 400, "height": 900})
    try:
        page = context.new_page()
        login = page.goto(f"{console.url}/login")
        assert login is not None
        assert page.locator("meta[name=viewport]").count() == 1
        assert "system-ui" in page.evaluate("() => getComputedStyle(document.body).fontFamily")
        page.screenshot(path=str(tmp_path / "login-dark-400px.png"), full_page=True)
        page.goto(f"{console.url}/login?token={console.doors.login_token}")
        page.goto(f"{console.url}/?" + urlencode({"topic": TOPIC}))
        page.locator("li.hit").first.wait_for()
        ratios = page.evaluate(_CONTRAST, ".likelihood")
        assert ratios, "no confidence word on the page"
        assert min(ratios) >= 4.5, ratios
        page.screenshot(path=str(tmp_path / "search-dark-400px.png"), full_page=True)
    finally:
        context.close()
