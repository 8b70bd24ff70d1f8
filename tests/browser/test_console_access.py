"""Keyword search for people, and accessibility basics, in Chromium (issue 36, points 4
and 5): a person's "redis OOM" is a keyword search, labelled as such, never the agent's
sentence rule's refusal; a skip link first; the score bar says its parts in words (the
vector part is striped, not only another colour); every control reachable by keyboard."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

from .conftest import Tab

REDIS = {
    "title": "Redis OOM evicted the session keys",
    "summary": "Redis ran out of memory (OOM) under the sale's load and evicted the session "
    "keys; raising maxmemory and moving sessions to their own instance fixed it.",
    "service": "sessions",
}
OTHER = {
    "title": "Redis replica fell behind during the backup",
    "summary": "The nightly backup on the primary slowed replication until the replica lagged.",
    "service": "sessions",
}


def test_keywords_are_a_persons_search_labelled_as_such(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    wanted = console.create(REDIS)
    console.create(OTHER)
    # typed in the agent's mode, the words are refused as a topic and offered as keywords
    page = tab.open("/?" + urlencode({"topic": "redis OOM"}))
    assert "takes a sentence" in page.locator("p.error").inner_text()
    tab.problems.clear()  # the 422 page
    page.get_by_role("link", name="as keywords instead").click()
    page.wait_for_url("**mode=keywords**")
    assert page.locator("h1").inner_text() == "Keyword search"
    results = page.locator("section.keyword-results")
    assert "Keyword mode (for people, not how the agent is answered)" in results.inner_text()
    assert results.locator("li").count() == 1
    assert results.locator("li").first.get_attribute("data-entry") == wanted["entry_id"]
    assert page.locator("input[name=mode][value=keywords]").is_checked()
    tab.shot("search-keywords", tmp_path)
    # both words must appear: "redis backup" finds the other entry only
    page = tab.open("/?" + urlencode({"mode": "keywords", "topic": "redis backup"}))
    assert (
        page.locator("section.keyword-results li").all_inner_texts()[0].startswith(OTHER["title"])
    )
    assert page.locator("section.keyword-results li").count() == 1


def test_a_skip_link_a_worded_score_bar_and_a_keyboard_path(tab: Tab, tmp_path: Path) -> None:
    console = tab.console
    console.create(REDIS)
    console.gateway.drain()
    page = tab.open(
        "/?" + urlencode({"topic": "the session keys were evicted because redis ran out of memory"})
    )
    # the first Tab reaches the skip link, which moves focus to the page's content
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent")
    assert focused == "Skip to the page's content"
    assert page.locator("a.skip").is_visible()
    tab.shot("skip-link", tmp_path)
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    # the score bar's meaning in words, and its vector part striped as well as coloured
    bar = page.locator("li.hit svg.bar").first
    label = bar.get_attribute("aria-label") or ""
    assert "lexical part" in label
    assert "vector part" in label
    assert bar.locator("rect[fill='url(#stripes)']").count() == 1
    # the legend is folded under the hits (issue 53): one click away, by keyboard too
    assert "striped: vector" in page.locator("p.legend").text_content()

    # every control of the page is reached by Tab, in order, none skipped
    controls = page.evaluate(
        "() => [...document.querySelectorAll("
        "'a[href], button, input:not([type=hidden]), select, textarea, summary')]"
        ".filter(e => e.offsetParent !== null)"
        # what a folded <details> holds is reached once it is opened: its summary is
        ".filter(e => { const d = e.closest('details:not([open])');"
        "  return !d || (e.tagName === 'SUMMARY' && e.parentElement === d); }).length"
    )
    reached = set()
    page.locator("a.skip").focus()
    for _ in range(controls + 5):
        reached.add(page.evaluate("document.activeElement.outerHTML.slice(0, 120)"))
        page.keyboard.press("Tab")
    assert len(reached) >= controls, "\n".join(sorted(reached))
