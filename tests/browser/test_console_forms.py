"""The console's forms as a hostile (or clumsy) admin fills them in, over plain HTTP (no
browser needed): what the console forwards to the API is checked first, and a refusal is
a page, never a 500 or a request the client cannot send."""

from __future__ import annotations

import http.client
from html.parser import HTMLParser
from urllib.parse import urlencode, urlsplit

import pytest

from grandbo.console.security import Session

from .conftest import ConsoleServer

POOL = {
    "title": "Checkout pool exhausted by a connection leak",
    "summary": "The checkout service leaked database connections on a retry path until the "
    "pool was exhausted and requests timed out waiting for a connection.",
}


def _post(console: ConsoleServer, session: Session, path: str, form: dict[str, str]):  # type: ignore[no-untyped-def]
    parts = urlsplit(console.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(
            "POST",
            path,
            body=urlencode({**form, "csrf": session.csrf_token}),
            headers={
                "Host": parts.netloc,
                "Origin": console.url,
                "Cookie": f"{console.doors.cookie_name}={session.session_id}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.mark.parametrize("key", ["a\r\nX-Injected: 1", "k\nb", "clé-€", "x" * 300])
def test_a_forged_idempotency_key_is_refused_and_nothing_is_written(
    console: ConsoleServer, key: str
) -> None:
    token = console.doors.login_token
    assert token is not None
    session = console.doors.log_in(token)
    assert session is not None
    entry = console.create(POOL)
    text = {**POOL, "title": "Checkout pool exhausted by a leaked connection on retry"}
    status, page = _post(
        console,
        session,
        f"/entries/{entry['entry_id']}/correct",
        {**text, "idempotency_key": key},
    )
    assert status == 400, page
    assert "idempotency key" in page
    status, page = _post(console, session, "/entries/new", {**text, "idempotency_key": key})
    assert status == 400, page
    assert console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body["revision"] == 1
    listed = console.api("POST", "/v1/admin/catalog", {}).body["entries"]
    assert [e["entry_id"] for e in listed] == [entry["entry_id"]]


@pytest.mark.parametrize("days", ["٣", "1_0", "1 0", "+", "0x10"])
def test_a_number_is_ascii_digits_only(console: ConsoleServer, days: str) -> None:
    token = console.doors.login_token
    assert token is not None
    session = console.doors.log_in(token)
    assert session is not None
    before = console.api("GET", "/v1/admin/settings").body["episodic_ttl_days"]
    status, page = _post(console, session, "/settings", {"episodic_ttl_days": days})
    assert status == 400, page
    assert "whole number" in page
    assert console.api("GET", "/v1/admin/settings").body["episodic_ttl_days"] == before


def test_every_scope_the_query_takes_is_offered_and_taken(console: ConsoleServer) -> None:
    """The search's scopes are the API's (issue 27 added `correlated`): each is in the
    form, and a search with it is answered, not refused by the console itself."""
    token = console.doors.login_token
    assert token is not None
    session = console.doors.log_in(token)
    assert session is not None
    console.create({**POOL, "service": "checkout-api"})
    parts = urlsplit(console.url)
    cookie = f"{console.doors.cookie_name}={session.session_id}"
    for scope in ("blast_radius", "dependencies", "correlated"):
        query = {"topic": POOL["summary"], "service": "checkout-api", "scope": scope}
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            conn.request(
                "GET", "/?" + urlencode(query), headers={"Host": parts.netloc, "Cookie": cookie}
            )
            response = conn.getresponse()
            page = response.read().decode()
        finally:
            conn.close()
        assert response.status == 200, page
        assert f'<option value="{scope}" selected>' in page


class _Form(HTMLParser):
    """The fields a browser submits of one form, as the page fills them in."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form":
            self.inside = named.get("id") == self.form_id
        elif self.inside and tag == "input" and named.get("name"):
            self.fields[str(named["name"])] = named.get("value") or ""
        elif self.inside and tag == "textarea" and named.get("name"):
            self._textarea = str(named["name"])
            self.fields[self._textarea] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea] += data


def _correct_form(console: ConsoleServer, session: Session, entry_id: str) -> dict[str, str]:
    """The fields of the entry page's Correct form as the page fills them in."""
    parts = urlsplit(console.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(
            "GET",
            f"/entries/{entry_id}",
            headers={
                "Host": parts.netloc,
                "Cookie": f"{console.doors.cookie_name}={session.session_id}",
            },
        )
        page = conn.getresponse().read().decode()
    finally:
        conn.close()
    form = _Form("correct")
    form.feed(page)
    fields = dict(form.fields)
    fields.pop("csrf")
    return fields


def test_correcting_the_title_keeps_the_tags_the_entry_was_given(console: ConsoleServer) -> None:
    """An admin fixes a typo in the title, leaving the rest of the form as shown: the tags
    the entry was given by hand are still its tags, as they were written."""
    token = console.doors.login_token
    assert token is not None
    session = console.doors.log_in(token)
    assert session is not None
    entry = console.create({**POOL, "service": "checkout-api", "tags": ["pgbouncer", "INC-4711"]})
    assert entry["tags"] == ["pgbouncer", "INC-4711"]
    fields = _correct_form(console, session, entry["entry_id"])
    assert fields["title"] == POOL["title"]
    assert fields["tags"] == "pgbouncer, INC-4711"
    fixed = {**fields, "title": "Checkout pool exhausted by a connection leak on retry"}
    status, answer = _post(console, session, f"/entries/{entry['entry_id']}/correct", fixed)
    assert status == 303, answer
    corrected = console.api("GET", f"/v1/admin/entries/{entry['entry_id']}").body
    assert corrected["revision"] == 2
    assert corrected["tags"] == ["pgbouncer", "INC-4711"]


@pytest.mark.parametrize(
    "tags",
    [
        "Redis, service-discovery",  # an incident's tags (`redis` was shown as `redi`)
        "caching, queries, OOMKilled, raises, entries",  # words the stemmer shortens
        "k8s/ingress, us-east-1, db.pool.max, p99",
        "",
    ],
)
def test_every_form_saved_unchanged_keeps_every_field_as_it_was(
    console: ConsoleServer, tags: str
) -> None:
    """Issue 53: a new entry typed in the console, then its Correct form saved as the page
    shows it: every field reads back exactly as it was typed, tags included (no stems)."""
    token = console.doors.login_token
    assert token is not None
    session = console.doors.log_in(token)
    assert session is not None
    typed = {**POOL, "service": "checkout-api", "tags": tags}
    status, answer = _post(console, session, "/entries/new", typed)
    assert status == 303, answer
    (listed,) = console.api("POST", "/v1/admin/catalog", {}).body["entries"]
    entry_id = listed["entry_id"]
    written = [tag.strip() for tag in tags.split(",") if tag.strip()]
    stored = console.api("GET", f"/v1/admin/entries/{entry_id}").body
    assert stored["tags"] == written
    shown = _correct_form(console, session, entry_id)
    assert {k: shown[k] for k in ("title", "summary", "service", "tags")} == {
        **typed,
        "tags": ", ".join(written),
    }
    status, answer = _post(console, session, f"/entries/{entry_id}/correct", shown)
    assert status == 303, answer  # a revision saying the same: the history shows it
    again = console.api("GET", f"/v1/admin/entries/{entry_id}").body
    for field in ("title", "summary", "service", "tags"):
        assert again[field] == stored[field], field
    reread = _correct_form(console, session, entry_id)
    assert {k: reread[k] for k in typed} == {k: shown[k] for k in typed}


def test_a_redacted_entrys_page_shows_its_redaction(console: ConsoleServer) -> None:
    token = console.doors.login_token
    assert token is not None
    session = console.doors.log_in(token)
    assert session is not None
    entry = console.create(POOL)
    path = f"/v1/admin/entries/{entry['entry_id']}/redaction"
    assert console.api("POST", path, {"reason": "quoted a customer's password"}).status == 200
    parts = urlsplit(console.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(
            "GET",
            f"/entries/{entry['entry_id']}",
            headers={
                "Host": parts.netloc,
                "Cookie": f"{console.doors.cookie_name}={session.session_id}",
            },
        )
        response = conn.getresponse()
        page = response.read().decode()
    finally:
        conn.close()
    assert response.status == 200, page
    assert 'data-type="entry_redacted"' in page
    assert "quoted a customer&#39;s password" in page
    assert POOL["title"] not in page
    assert 'id="correct"' not in page  # nothing to act on
