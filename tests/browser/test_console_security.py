"""The console as an attacker sees it: stored text that is markup, a forged form from
another origin, a rebinding Host, a stolen login link, another organization's ids. Each
test runs with two more people of the organization signed in, in browsers of their own
(issue 36: sessions are per person); each must still be signed in when the test ends."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from playwright.sync_api import Browser

from grandbo.api import people_keyring as people
from grandbo.api.people import mint_sign_in_token

from .conftest import ConsoleServer, Tab, sign_in


@pytest.fixture(autouse=True)
def others_signed_in(
    browser: Browser, console: ConsoleServer, keyring_file: Path
) -> Iterator[None]:
    contexts = []
    for email, role in (("ops-admin@example.com", "admin"), ("ops-viewer@example.com", "viewer")):
        key = people.add_person(keyring_file, console.tenant, email, role)  # type: ignore[arg-type]
        context = browser.new_context()
        page = context.new_page()
        sign_in(page, f"{console.url}/login?token={mint_sign_in_token(key)}")
        assert page.url == console.url + "/"
        contexts.append((context, page))
    yield
    for context, page in contexts:
        page.goto(console.url + "/entries")
        assert page.url == console.url + "/entries", "another person's session ended"
        context.close()


HOSTILE_TITLE = "<script>alert('title')</script> pool exhausted"
HOSTILE_SUMMARY = (
    "\"><img src=x onerror=alert('summary')> The checkout pool was exhausted by a leaked "
    "connection on the retry path."
)
HOSTILE_SERVICE = "checkout-api"
TOPIC = "the checkout pool was exhausted by a leaked connection on the retry path"


def _raw(console: ConsoleServer, method: str, path: str, headers: dict[str, str], body: str = ""):  # type: ignore[no-untyped-def]
    parts = urlsplit(console.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def test_stored_markup_renders_as_text_everywhere(tab: Tab) -> None:
    console = tab.console
    entry = console.create(
        {
            "title": HOSTILE_TITLE,
            "summary": HOSTILE_SUMMARY,
            "service": HOSTILE_SERVICE,
            "tags": ["<b>bold</b>"],
        }
    )
    console.gateway.drain()
    pages = [
        "/?" + urlencode({"topic": TOPIC}),
        f"/entries/{entry['entry_id']}",
        "/entries",
        "/why?" + urlencode({"topic": TOPIC, "entry_id": entry["entry_id"]}),
    ]
    for path in pages:
        page = tab.open(path)
        body = page.locator("body")
        assert HOSTILE_TITLE in body.inner_text(), path
        # no element came of the stored text: no script, no img, no bold tag
        assert page.locator("main script").count() == 0, path
        assert page.locator("main img").count() == 0, path
        assert page.locator("main b").count() == 0, path
    assert tab.problems == []  # no dialog opened, no script ran


def test_a_forged_cross_site_form_changes_nothing(
    tab: Tab, browser: Browser, tmp_path: Path
) -> None:
    console = tab.console
    entry = console.create(
        {
            "title": "Checkout pool exhausted by a connection leak",
            "summary": "The checkout service leaked connections until the pool was exhausted.",
        }
    )
    # another site's page, in the same browser as the logged-in admin, posts a retirement
    attacker = tab.context.new_page()
    attacker.set_content(
        f"""<form id=f method=post action="{console.url}/entries/{entry["entry_id"]}/retire">
        <input name=reason value=pwned><input name=csrf value=guess></form>"""
    )
    with attacker.expect_navigation() as navigation:
        attacker.evaluate("document.getElementById('f').submit()")
    refused = navigation.value
    assert refused is not None
    assert refused.status == 403  # its Origin is not the console's (and no cookie came)
    assert console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body["status"] == "active"
    attacker.close()
    tab.problems.clear()  # the refusal is a 403, which Chromium reports

    # the console's own origin, but no CSRF token (or a wrong one): refused, nothing changed
    cookie = next(c for c in tab.context.cookies() if c["name"] == "grandbo_console")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    host = urlsplit(console.url).netloc
    for form in ("reason=pwned", "reason=pwned&csrf=wrong"):
        status, _, text = _raw(
            console,
            "POST",
            f"/entries/{entry['entry_id']}/retire",
            {
                "Host": host,
                "Origin": console.url,
                "Cookie": f"grandbo_console={cookie['value']}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            form,
        )
        assert status == 403, text
        assert "CSRF" in text
    assert console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body["status"] == "active"


def test_a_rebinding_host_and_a_foreign_origin_are_refused(tab: Tab) -> None:
    console = tab.console
    cookie = next(c for c in tab.context.cookies() if c["name"] == "grandbo_console")
    session = f"grandbo_console={cookie['value']}"
    status, headers, _ = _raw(console, "GET", "/", {"Host": "evil.example:80", "Cookie": session})
    assert status == 403
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    host = urlsplit(console.url).netloc
    status, _, _ = _raw(
        console,
        "POST",
        "/settings",
        {
            "Host": host,
            "Origin": "http://evil.example",
            "Cookie": session,
            "Content-Type": "application/x-www-form-urlencoded",
        },
        "episodic_ttl_days=1",
    )
    assert status == 403
    assert console.api("GET", "/v1/admin/settings").body["episodic_ttl_days"] == 30

    status, headers, _ = _raw(console, "GET", "/", {"Host": host, "Cookie": session})
    assert status == 200
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy
    # the console's own files only (its picker.js): no inline script, no other origin
    assert "script-src 'self';" in policy
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert headers["x-frame-options"] == "DENY"


def test_the_login_link_opens_one_session_only(tab: Tab, browser: Browser) -> None:
    console = tab.console
    # the fixture's tab spent it; a second browser with the same link gets nothing
    other = browser.new_context()
    page = other.new_page()
    response = page.goto(f"{console.url}/login?token=anything")
    assert response is not None
    assert response.status == 403
    page.goto(f"{console.url}/entries")
    assert page.url.endswith("/login")  # no session: the login page, not the entries
    other.close()


def test_another_organizations_entries_stay_out_of_reach(tab: Tab) -> None:
    console = tab.console
    theirs = console.create(
        {
            "title": "Their pool exhausted by a connection leak",
            "summary": "Another organization's lesson: their pool was exhausted by a leak.",
        },
        tenant=console.other_tenant,
    )
    mine = console.create(
        {
            "title": "Our pool exhausted by a connection leak",
            "summary": "Our lesson: the checkout pool was exhausted by a leaked connection.",
        }
    )
    console.gateway.drain()
    page = tab.open(f"/entries/{theirs['entry_id']}")
    assert "not found" in page.locator("p.error").inner_text()
    assert "Their pool" not in page.content()
    page = tab.open("/why?" + urlencode({"topic": TOPIC, "entry_id": theirs["entry_id"]}))
    assert "not found" in page.locator("p.error").inner_text()
    page = tab.open("/?" + urlencode({"topic": TOPIC}))
    assert "Their pool" not in page.content()
    assert "Our pool" in page.content()
    page = tab.open("/entries")
    assert "Their pool" not in page.content()
    # a form that names their entry as the merge target changes neither
    page = tab.open(f"/entries/{mine['entry_id']}")
    page.fill("#merge input[name=into]", theirs["entry_id"])
    page.click("#merge button")
    assert "not found" in page.locator("p.error").inner_text()
    assert console.api("GET", f"/v1/admin/entries/{mine['entry_id']}").body["status"] == "active"
    tab.problems.clear()  # the 404 pages
