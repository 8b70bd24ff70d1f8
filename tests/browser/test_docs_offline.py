"""The documentation site on a closed network (issue 53, point 3): built, then opened as a
file in Debian's headless Chromium with every request to another host refused, each page
renders whole, in light and dark, and its search answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route

from tests.unit.test_docs_site import build_site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(tmp_path_factory.mktemp("docs") / "site")


@pytest.fixture
def offline(browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    """A page that may read files only: what it asked of another host is listed."""
    context = browser.new_context()
    remote: list[str] = []

    def refuse(route: Route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            remote.append(route.request.url)
            route.abort()

    context.route("**/*", refuse)
    page = context.new_page()
    yield page, remote
    context.close()


def test_search_answers_on_a_site_opened_as_a_file(
    site: Path, offline: tuple[Page, list[str]]
) -> None:
    page, remote = offline
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((site / "index.html").as_uri())
    page.locator("label.md-search__icon, .md-search__input").first.click()
    page.locator(".md-search__input").press_sequentially("redaction", delay=30)
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=15_000)
    assert results.count() > 0
    assert "redact" in page.locator(".md-search-result").inner_text().lower()
    assert remote == []
    assert errors == []


@pytest.mark.parametrize(
    "name",
    ["index.html", "quickstart.html", "deploying.html", "reference/http-api.html"],
)
def test_every_page_loads_nothing_from_another_host_and_has_a_dark_mode(
    site: Path, offline: tuple[Page, list[str]], name: str
) -> None:
    page, remote = offline
    page.goto((site / name).as_uri())
    page.wait_for_load_state("load")
    assert remote == [], f"{name} asked another host for {remote}"
    assert "```mermaid" not in page.content()  # no diagram left as its source
    light = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    page.locator("label[for^='__palette']").first.click()
    dark = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    assert {light, dark} == {"default", "slate"}
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)") or light == "slate"
