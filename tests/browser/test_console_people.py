"""People in Chromium (issue 36, point 1): several people signed in at once, each with
their own link and session; each action names its person; a viewer is refused a write;
one person's sign-out ends only their session; a removed person is signed out at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from grandbo.api import people_keyring as people
from grandbo.api.people import mint_sign_in_token

from .conftest import ConsoleServer, Tab, sign_in

LESSON = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
}


class Team:
    """Browser contexts of their own (cookies apart), one per person signed in."""

    def __init__(self, browser: Browser, console: ConsoleServer, keyring: Path) -> None:
        self.browser = browser
        self.console = console
        self.keyring = keyring
        self.contexts: list[BrowserContext] = []
        self.problems: list[str] = []

    def person(self, email: str, role: str) -> str:
        key = people.add_person(self.keyring, self.console.tenant, email, role)  # type: ignore[arg-type]
        return f"{self.console.url}/login?token={mint_sign_in_token(key)}"

    def signed_in(self, link: str) -> Page:
        context = self.browser.new_context(viewport={"width": 1200, "height": 800})
        context.set_default_timeout(10_000)
        self.contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        sign_in(page, link)
        assert page.url == self.console.url + "/", page.url
        return page


@pytest.fixture
def team(browser: Browser, console: ConsoleServer, keyring_file: Path) -> Iterator[Team]:
    crowd = Team(browser, console, keyring_file)
    yield crowd
    for context in crowd.contexts:
        context.close()
    assert crowd.problems == []


def test_people_signed_in_at_once_act_as_themselves(team: Team, tmp_path: Path) -> None:
    console = team.console
    admin_link = team.person("ada@example.com", "admin")
    curator_link = team.person("cy@example.com", "curator")
    viewer_link = team.person("vi@example.com", "viewer")
    ada, cy, vi = (team.signed_in(link) for link in (admin_link, curator_link, viewer_link))
    for page, who, role in ((ada, "ada", "admin"), (cy, "cy", "curator"), (vi, "vi", "viewer")):
        page.reload()
        header = page.locator("header .who").inner_text()
        assert f"{who}@example.com" in header
        assert f"role {role}" in header

    # the curator writes a lesson in the console: its event names them
    cy.goto(console.url + "/entries/new")
    cy.fill("input[name=title]", LESSON["title"])
    cy.fill("textarea[name=summary]", LESSON["summary"])
    cy.click("form.entry-form button[type=submit]")
    assert "Entry created" in cy.locator("p.done").inner_text()
    entry_id = cy.url.split("/entries/")[1].split("?")[0]
    assert "by person:cy@example.com" in cy.locator("ol.history li.event").first.inner_text()
    Tab(cy, team.contexts[1], console, []).shot("people-curator-entry", tmp_path)

    # the viewer sees it with no action offered, and a correction sent anyway (the form
    # another page showed them) is refused, the role named; nothing is stored
    vi.goto(f"{console.url}/entries/{entry_id}")
    assert vi.locator("#correct").count() == 0
    assert vi.locator("#merge").count() == 0
    assert "viewer, reads only" in vi.locator("main").inner_text()
    csrf = vi.locator("header form[action='/logout'] input[name=csrf]").input_value()
    vi.goto(f"{console.url}/entries/{entry_id}")
    vi.evaluate(
        """([url, csrf]) => { const f = document.createElement('form'); f.method = 'post';
        f.action = url; for (const [k, v] of [['csrf', csrf], ['title', 'A viewer edit'],
        ['summary', 'A viewer edit of the summary text.']]) { const i =
        document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); }
        document.body.appendChild(f); f.submit(); }""",
        [f"{console.url}/entries/{entry_id}/correct", csrf],
    )
    vi.wait_for_selector("p.error")
    refusal = vi.locator("p.error").inner_text()
    assert "role viewer may not" in refusal
    assert "curator" in refusal
    Tab(vi, team.contexts[2], console, []).shot("people-viewer-refused", tmp_path)
    stored = console.api("GET", f"/v1/admin/entries/{entry_id}").body
    assert stored["revision"] == 1

    # the admin retires it: the history names each person who acted
    ada.goto(f"{console.url}/entries/{entry_id}")
    ada.fill("#retire input[name=reason]", "a better diagnosis replaced it")
    ada.click("#retire button[type=submit]")
    history = console.api("GET", f"/v1/admin/entries/{entry_id}/history").body
    assert [e["actor"] for e in history["events"]] == [
        "person:cy@example.com",
        "person:ada@example.com",
    ]

    # the viewer signs out: only their session ends, and their link opens a new one
    vi.click("header form[action='/logout'] button")
    assert vi.url == console.url + "/login"
    cy.goto(console.url + "/entries")
    assert cy.url == console.url + "/entries"
    sign_in(vi, viewer_link)
    assert vi.url == console.url + "/"

    # the curator is removed: their next page is the sign-in page, their link refused
    people.remove_person(team.keyring, console.tenant, "cy@example.com")
    cy.goto(console.url + "/entries")
    assert cy.url == console.url + "/login"
    response = cy.goto(curator_link)
    assert response is not None
    assert response.status == 403
    # and the others are still signed in
    ada.goto(console.url + "/entries")
    assert ada.url == console.url + "/entries"
    Tab(ada, team.contexts[0], console, []).shot("people-admin-entries", tmp_path)


def test_a_renewed_key_or_another_organizations_person_opens_nothing(team: Team) -> None:
    console = team.console
    link = team.person("mo@example.com", "curator")
    page = team.signed_in(link)
    people.renew_person(team.keyring, console.tenant, "mo@example.com")
    page.goto(console.url + "/")
    assert page.url == console.url + "/login"
    assert page.goto(link).status == 403  # type: ignore[union-attr]
    # a person of another organization in the same keyring is not this console's
    other = people.add_person(team.keyring, console.other_tenant, "eve@example.com", "admin")
    refused = page.goto(f"{console.url}/login?token={mint_sign_in_token(other)}")
    assert refused is not None
    assert refused.status == 403


def test_one_persons_form_token_does_not_act_for_another(team: Team) -> None:
    """Sessions are per person: a form token taken from one person's page, sent with
    another person's cookie, is refused and writes nothing."""
    console = team.console
    ann = team.signed_in(team.person("ann@example.com", "admin"))
    bob = team.signed_in(team.person("bob@example.com", "admin"))
    ann_csrf = ann.locator("header form[action='/logout'] input[name=csrf]").input_value()
    bob_csrf = bob.locator("header form[action='/logout'] input[name=csrf]").input_value()
    assert ann_csrf != bob_csrf
    refused = bob.request.post(
        f"{console.url}/settings",
        form={"csrf": ann_csrf, "episodic_ttl_days": "3"},
        headers={"Origin": console.url},
    )
    assert refused.status == 403
    assert console.api("GET", "/v1/admin/settings").body["episodic_ttl_days"] == 30
    # with his own token it is his change, and only his session signs out
    accepted = bob.request.post(
        f"{console.url}/settings",
        form={"csrf": bob_csrf, "episodic_ttl_days": "3"},
        headers={"Origin": console.url},
    )
    assert accepted.status == 200
    assert console.api("GET", "/v1/admin/settings").body["episodic_ttl_days"] == 3
    ann.click("header form[action='/logout'] button")
    bob.goto(console.url + "/settings")
    assert bob.url == console.url + "/settings"


def test_a_sign_in_link_asks_before_it_signs_anyone_in(team: Team, tmp_path: Path) -> None:
    """Following a link opens no session: a link sent by someone else (their own, to have
    a teammate act under their name) asks whose it is, and only the page's own POST signs
    in; a forged cross-site POST of it is refused."""
    console = team.console
    ann_link = team.person("ann@example.com", "admin")
    bob_link = team.person("bob@example.com", "curator")
    bob = team.signed_in(bob_link)
    sessions = console.doors.session_count()

    # Bob follows a link Ann sent him: he is asked, and still signed in as himself
    bob.goto(ann_link)
    question = bob.locator("main").inner_text()
    assert "Sign in as ann@example.com, role admin" in question
    assert "This browser is signed in as bob@example.com now" in question
    Tab(bob, team.contexts[0], console, []).shot("sign-in-confirm", tmp_path)
    assert console.doors.session_count() == sessions
    bob.goto(console.url + "/")
    assert "signed in as bob@example.com" in bob.locator("header .who").inner_text()
    # another site's page posting the link is refused at the door
    token = ann_link.split("token=", 1)[1]
    forged = bob.request.post(
        f"{console.url}/login", form={"token": token}, headers={"Origin": "https://evil.example"}
    )
    assert forged.status == 403
    assert console.doors.session_count() == sessions
    # confirmed, the new session replaces his: his old one is ended, not left behind
    sign_in(bob, ann_link)
    assert "signed in as ann@example.com" in bob.locator("header .who").inner_text()
    assert console.doors.session_count() == sessions


def test_expired_sessions_are_forgotten(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link followed day after day leaves no session behind once each has expired."""
    import time as clock

    console = team.console
    link = team.person("dee@example.com", "viewer")
    for _ in range(3):
        team.signed_in(link)
    held = console.doors.session_count()
    later = clock.time() + 13 * 3600  # past a session's 12 hours
    monkeypatch.setattr("grandbo.console.security.time.time", lambda: later)
    fresh = console.doors.log_in(link.split("token=", 1)[1])
    assert fresh is not None
    assert console.doors.session_count() == held - 3 + 1


def test_the_sessions_a_console_holds_are_bounded(team: Team) -> None:
    """A link followed without end (each time a 12-hour session) keeps at most
    MAX_SESSIONS_PER_PERSON of them, the newest; a removed person's sessions are dropped
    at the next sign-in, not kept until they expire."""
    from grandbo.console.security import MAX_SESSIONS_PER_PERSON

    console = team.console
    doors = console.doors
    ann = team.person("ann@example.com", "curator").split("token=", 1)[1]
    bob = team.person("bob@example.com", "viewer").split("token=", 1)[1]
    bob_session = doors.log_in(bob)
    assert bob_session is not None
    before = doors.session_count()
    anns = [doors.log_in(ann) for _ in range(3 * MAX_SESSIONS_PER_PERSON)]
    assert doors.session_count() == before + MAX_SESSIONS_PER_PERSON
    # the newest are the ones kept; Bob's is untouched
    newest = anns[-1]
    assert newest is not None
    held = {s.session_id for s in doors._sessions.values()}
    assert newest.session_id in held
    assert bob_session.session_id in held
    assert anns[0] is not None
    assert anns[0].session_id not in held
    # Ann is removed: her sessions go at the next sign-in of anyone
    people.remove_person(team.keyring, console.tenant, "ann@example.com")
    assert doors.log_in(bob) is not None
    assert doors.session_count() == before + 1


def test_nothing_is_offered_that_a_persons_role_may_not_do(team: Team, tmp_path: Path) -> None:
    """Issue 45: a curator reads the settings and a viewer the health page, with no form
    that would answer 403; an admin sets the query rate and the log's bound from the page."""
    cy = team.signed_in(team.person("cy@example.com", "curator"))
    page = cy.goto(team.console.url + "/settings")
    assert page is not None
    assert cy.locator("form[action='/settings']").count() == 0
    assert "Only an admin changes these" in cy.content()
    assert cy.locator("strong.query-rate").inner_text() == "600"
    vi = team.signed_in(team.person("vi@example.com", "viewer"))
    vi.goto(team.console.url + "/health")
    assert vi.locator("form[action='/health']").count() == 0

    ada = team.signed_in(team.person("ada@example.com", "admin"))
    ada.goto(team.console.url + "/settings")
    bounds = ada.locator("form:has(input[value='log-bounds'])")
    bounds.locator("input[name=query_rate_per_minute]").fill("120")
    bounds.locator("input[name=retrieval_rows_per_day]").fill("5000")
    bounds.locator("button[type=submit]").click()
    assert ada.locator("strong.query-rate").inner_text() == "120"
    assert ada.locator("strong.rows-per-day").inner_text() == "5000"
    Tab(ada, team.contexts[-1], team.console, []).shot("settings-log-bounds", tmp_path)


def test_an_admin_manages_people_on_the_people_page(team: Team, tmp_path: Path) -> None:
    """Issue 45: the people page (an admin's) over the same API: list, add with a role and
    hand over the link shown once, a new link, renew a key, remove; a curator is offered
    no People link and is refused the page; the admin cannot remove themselves."""
    console = team.console
    ada = team.signed_in(team.person("ada@example.com", "admin"))
    cy = team.signed_in(team.person("cy@example.com", "curator"))
    assert cy.locator("header nav a[href='/people']").count() == 0
    refused = cy.goto(console.url + "/people")
    assert refused is not None
    assert refused.status == 403
    assert "an admin's" in cy.locator("main").inner_text()

    ada.click("header nav a[href='/people']")
    rows = ada.locator("table.people tbody tr")
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())] == [
        "ada@example.com (you)",
        "cy@example.com",
    ]
    # no way to remove or renew oneself is offered
    own = rows.nth(0)
    assert own.locator("button", has_text="Remove").count() == 0
    assert "another admin" in own.inner_text()

    # add a viewer: the link is shown once, on this page, and it signs them in
    ada.fill("form.add-person input[name=email]", "Vi@Example.com")
    ada.select_option("form.add-person select[name=role]", "viewer")
    ada.click("form.add-person button[type=submit]")
    made = ada.locator("section.made")
    assert "vi@example.com is viewer" in made.inner_text()
    link = made.locator("input.link").input_value()
    assert link.startswith(console.url + "/login?token=gbl1.")
    assert "token=" not in ada.url
    Tab(ada, team.contexts[0], console, []).shot("people-page", tmp_path)
    vi = team.signed_in(link)
    assert "role viewer" in vi.locator("header .who").inner_text()

    # a new link for the viewer; then their key renewed: both links and the session end
    vi_row = ada.locator("table.people tbody tr", has_text="vi@example.com")
    vi_row.locator("button", has_text="New link").click()
    second = ada.locator("section.made input.link").input_value()
    assert "A new link for vi@example.com" in ada.locator("section.made").inner_text()
    assert second.startswith(console.url + "/login?token=gbl1.")  # (the same within a second)
    vi_row = ada.locator("table.people tbody tr", has_text="vi@example.com")
    renew = vi_row.locator("form", has=ada.locator("button", has_text="Renew key"))
    renew.locator("button").click()  # the box unticked: the browser does not send it
    assert ada.url.endswith("/people")
    assert ada.locator("section.made").count() == 1  # still the page, nothing done
    renew.locator("input[name=confirm]").check()
    renew.locator("button").click()
    assert "Key renewed" in ada.locator("p.done").inner_text()
    vi.goto(console.url + "/")
    assert vi.url == console.url + "/login"
    for old in (link, second):
        response = vi.goto(old)
        assert response is not None
        assert response.status == 403

    # the curator removed: gone from the page, their session ended
    # sent without the box (a crafted form): refused, nothing removed
    csrf = ada.locator("header form[action='/logout'] input[name=csrf]").input_value()
    refused = ada.request.post(
        f"{console.url}/people",
        form={"csrf": csrf, "what": "remove", "email": "cy@example.com"},
        headers={"Origin": console.url},
    )
    assert refused.status == 400
    assert "sure" in refused.text()
    ada.goto(console.url + "/people")
    remove = ada.locator("table.people tbody tr", has_text="cy@example.com").locator(
        "form", has=ada.locator("button", has_text="Remove")
    )
    remove.locator("input[name=confirm]").check()
    remove.locator("button").click()
    assert "Removed" in ada.locator("p.done").inner_text()
    assert "cy@example.com" not in ada.locator("table.people").inner_text()
    cy.goto(console.url + "/entries")
    assert cy.url == console.url + "/login"
